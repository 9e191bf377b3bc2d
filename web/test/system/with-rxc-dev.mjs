// Runs a command (the browser e2e) against a real control plane: starts bin/rxc-dev (PostgreSQL,
// provisioner, nats-server, control plane, all real) in a throwaway state folder on free loopback
// ports, without its own console (e2e.test.ts serves the SPA with nginx on RXC_E2E_WEB_PORT, the
// origin rxc-dev's control plane allows), waits for its ready file, passes the URLs, the login and
// a sensor command (bin/sensor-agent enrolling with the claim code the test issues) as the
// RXC_E2E_* variables api.ts reads, then stops rxc-dev within a bound and removes the folder.
// The analytics chat is on: a fake model server and a fake MISP (chat-fakes.mjs, real wire
// formats) start first, and rxc-dev's control plane gets the ANALYTICS_CHAT_* variables for them.
// rxc-dev also writes RXC_E2E_SEED_SENSORS (default 10,000) fake sensors into a tenant of their own
// (fleet-real.test.ts pages, searches and commands them); they never report.
//
//   node test/system/with-rxc-dev.mjs yarn --silent test:system test/system/e2e.test.ts
//
// RXC_DEV_BIN and RXC_SENSOR_AGENT_BIN override the binaries (default: the repository's bin/, built
// by the root Makefile's `make build`, which `make test-web` runs first). A missing binary fails the
// run with what to do: like every system test, this one never skips.

import { spawn } from 'node:child_process';
import { accessSync, chmodSync, constants, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChatFakes } from './chat-fakes.mjs';

const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REPO = path.dirname(WEB_DIR);
const RESULTS = path.join(WEB_DIR, 'test-results', 'real-api');
const READY_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 45_000;

function die(msg) {
  console.error(`with-rxc-dev: ${msg}`);
  process.exit(1);
}

function binary(envName, fallback) {
  const file = process.env[envName] || path.join(REPO, 'bin', fallback);
  try {
    accessSync(file, constants.X_OK);
  } catch {
    die(`${file} is missing: run "make build" at the repository root (make test-web does), or set ${envName}`);
  }
  return file;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function exited(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.exitCode ?? 1);
    else proc.once('exit', (code) => resolve(code ?? 1));
  });
}

const command = process.argv.slice(2);
if (command.length === 0) die('usage: node test/system/with-rxc-dev.mjs <command> [args…]');
const rxcDev = binary('RXC_DEV_BIN', 'rxc-dev');
const agent = binary('RXC_SENSOR_AGENT_BIN', 'sensor-agent');

// Logs kept from an earlier failed run would read as this run's.
rmSync(path.join(RESULTS, 'rxc-dev-logs'), { recursive: true, force: true });
const base = mkdtempSync(path.join(os.tmpdir(), 'rxc-e2e-stack-'));
// PostgreSQL runs as the postgres user when the tests run as root: it must reach the folder.
chmodSync(base, 0o755);
const stateDir = path.join(base, 'state');
const readyFile = path.join(base, 'ready.json');
const sensorsDir = path.join(base, 'sensors');
mkdirSync(sensorsDir, { mode: 0o700 });
const webPort = await freePort();
const chatFakes = await startChatFakes();

const seedSensors = process.env.RXC_E2E_SEED_SENSORS ?? '10000';
if (!/^\d+$/.test(seedSensors)) die(`RXC_E2E_SEED_SENSORS must be a whole number, not ${seedSensors}`);

const any = '127.0.0.1:0';
const dev = spawn(
  rxcDev,
  ['--state', stateDir, '--provisioner-addr', any, '--nats-addr', any, '--api-addr', any, '--grpc-addr', any,
    '--web', 'none', '--web-addr', `127.0.0.1:${webPort}`, '--tenant', '', '--sensors', '0', '--seed-sensors', seedSensors, '--ready-file', readyFile],
  { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, ...chatFakes.env } },
);
const devExit = exited(dev);

let cleaned = false;
async function cleanup(failed) {
  if (cleaned) return;
  cleaned = true;
  if (dev.exitCode === null && dev.signalCode === null) {
    dev.kill('SIGTERM');
    const timer = setTimeout(() => dev.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await devExit;
    clearTimeout(timer);
  }
  await chatFakes.stop();
  if (failed && existsSync(path.join(stateDir, 'logs'))) {
    // The services' and agents' logs explain a failure; keep them with the screenshots (not the
    // agents' state folders: they hold keys and credentials).
    const logs = path.join(RESULTS, 'rxc-dev-logs');
    mkdirSync(RESULTS, { recursive: true });
    cpSync(path.join(stateDir, 'logs'), logs, { recursive: true });
    for (const d of readdirSync(sensorsDir)) {
      const log = path.join(sensorsDir, d, 'agent.log');
      if (existsSync(log)) copyFileSync(log, path.join(logs, `sensor-${d}.log`));
    }
    console.error(`with-rxc-dev: the stack's logs are in ${logs}`);
  }
  rmSync(base, { recursive: true, force: true });
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    await cleanup(true);
    process.exit(130);
  });
}

let ready;
const deadline = Date.now() + READY_TIMEOUT_MS;
while (!ready) {
  if (dev.exitCode !== null || dev.signalCode !== null) {
    await cleanup(true);
    die(`rxc-dev exited (${dev.exitCode ?? dev.signalCode}) before it was ready`);
  }
  if (Date.now() > deadline) {
    await cleanup(true);
    die(`rxc-dev was not ready within ${READY_TIMEOUT_MS / 1000}s`);
  }
  if (existsSync(readyFile)) ready = JSON.parse(readFileSync(readyFile, 'utf8'));
  else await new Promise((r) => setTimeout(r, 200));
}

// One agent per claim code, each with its own state folder and log; it reads the code from
// RXC_CLAIM_CODE (not visible in the process list). exec, so that the test's SIGTERM reaches the
// agent itself.
const sensorCmd = `d=$(mktemp -d "${sensorsDir}/agent-XXXXXX") && exec "${agent}" run --api "$RXC_API_BASE_URL" --state-dir "$d/state" >"$d/agent.log" 2>&1`;
const test = spawn(command[0], command.slice(1), {
  cwd: WEB_DIR,
  stdio: 'inherit',
  env: {
    ...process.env,
    RXC_E2E_API_BASE_URL: ready.apiBaseUrl,
    RXC_E2E_EMAIL: ready.email,
    RXC_E2E_PASSWORD: ready.password,
    RXC_E2E_WEB_PORT: String(webPort),
    RXC_E2E_SENSOR_CMD: sensorCmd,
    RXC_E2E_SEED_TENANT: ready.seedTenant ?? '',
    RXC_E2E_SEEDED_SENSORS: String(ready.seededSensors ?? 0),
    // The control plane's chat answers through chat-fakes.mjs (chat-real.test.ts relies on it).
    RXC_E2E_CHAT_FAKES: '1',
  },
});
const code = await exited(test);
await cleanup(code !== 0);
process.exit(code);
