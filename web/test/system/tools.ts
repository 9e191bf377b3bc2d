// Programs the system tests run. A missing one fails the test with the Debian package to
// install: these tests never skip.

import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, constants, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const HOOK = path.join(WEB_DIR, 'docker-entrypoint.d/40-rxc-config.sh');
export const DIST = path.join(WEB_DIR, 'dist');
export const RESULTS = path.join(WEB_DIR, 'test-results');

const PACKAGES: Record<string, string> = {
  '/usr/sbin/nginx': 'nginx-light (or nginx)',
  '/usr/bin/busybox': 'busybox',
  '/usr/bin/dash': 'dash',
  '/usr/bin/chromium': 'chromium',
};

export function requireTool(file: string): string {
  try {
    accessSync(file, constants.X_OK);
  } catch {
    throw new Error(`${file} is missing: install the Debian package ${PACKAGES[file] ?? '?'} (apt-get install ${PACKAGES[file]?.split(' ')[0]})`);
  }
  return file;
}

const tempDirs: string[] = [];

/** Removes every folder tempDir made in this test file (run by setup.ts after the file). */
export function removeTempDirs() {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `rxc-web-${prefix}-`));
  tempDirs.push(dir);
  // nginx started as root runs its workers as nobody: they must read what the tests write.
  chmodSync(dir, 0o755);
  return dir;
}

/** nginx workers (nobody) must read everything under dir, whatever the umask was. */
export function makeReadable(dir: string) {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) makeReadable(p);
    else chmodSync(p, 0o644);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

export interface HookResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the entrypoint hook under a shell ('busybox' or 'dash') with only the given environment. */
export function runHook(shell: 'busybox' | 'dash', env: Record<string, string | undefined>): HookResult {
  const argv = shell === 'busybox' ? [requireTool('/usr/bin/busybox'), ['sh', HOOK]] : [requireTool('/usr/bin/dash'), [HOOK]];
  const clean: Record<string, string> = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) clean[k] = v;
  const r = spawnSync(argv[0] as string, argv[1] as string[], { env: clean, encoding: 'utf8', timeout: 10_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function replaceOnce(text: string, from: string, to: string, file: string): string {
  if (!text.includes(from)) throw new Error(`${file} no longer contains "${from}": update the test's templating`);
  return text.split(from).join(to);
}

export interface Nginx {
  origin: string;
  port: number;
  root: string;
  configDir: string;
  stop: () => Promise<void>;
  /** Re-reads the config (and the hook's includes), as nginx -s reload does. */
  reload: () => Promise<void>;
  errorLog: () => string;
}

/**
 * Starts Debian's nginx with the production nginx.conf, default.conf and security headers,
 * changing only paths and the port, after running the entrypoint hook for its includes.
 */
export async function startNginx(opts: { apiBaseUrl: string; chat: boolean; port?: number; extraFiles?: Record<string, string | Buffer> }): Promise<Nginx> {
  const nginx = requireTool('/usr/sbin/nginx');
  if (!existsSync(path.join(DIST, 'index.html'))) throw new Error(`${DIST} has no build: run "yarn build" first (make test does)`);
  const prefix = tempDir('nginx');
  const configDir = path.join(prefix, 'rxc');
  const root = path.join(prefix, 'html');
  const confd = path.join(prefix, 'conf.d');
  mkdirSync(confd);
  cpSync(DIST, root, { recursive: true });
  for (const [name, body] of Object.entries(opts.extraFiles ?? {})) writeFileSync(path.join(root, name), body);
  rmSync(path.join(root, 'config.js'), { force: true });

  const port = opts.port ?? (await freePort());
  const hook = runHook('busybox', {
    VITE_API_BASE_URL: opts.apiBaseUrl,
    VITE_ANALYTICS_AI_CHAT_ENABLED: String(opts.chat),
    RXC_CONFIG_DIR: configDir,
    RXC_LISTEN_PORT: String(port),
    RXC_IF_INET6: path.join(prefix, 'no-ipv6'),
  });
  if (hook.status !== 0) throw new Error(`entrypoint hook failed: ${hook.stderr}`);
  // Loopback only: the hook's "listen PORT;" would bind every address.
  const listen = path.join(configDir, 'listen.conf');
  writeFileSync(listen, replaceOnce(readFileSync(listen, 'utf8'), `listen ${port};`, `listen 127.0.0.1:${port};`, listen));

  const mainSrc = path.join(WEB_DIR, 'nginx/nginx.conf');
  let main = readFileSync(mainSrc, 'utf8');
  main = replaceOnce(main, 'pid /tmp/nginx.pid;', `pid ${prefix}/nginx.pid;`, mainSrc);
  main = replaceOnce(main, '/tmp/nginx-', `${prefix}/nginx-`, mainSrc);
  main = replaceOnce(main, 'error_log stderr', `error_log ${prefix}/error.log`, mainSrc);
  main = replaceOnce(main, 'access_log /dev/stdout', `access_log ${prefix}/access.log`, mainSrc);
  main = replaceOnce(main, '/etc/nginx/conf.d/*.conf', `${confd}/*.conf`, mainSrc);
  writeFileSync(path.join(prefix, 'nginx.conf'), main);

  const serverSrc = path.join(WEB_DIR, 'nginx/default.conf');
  let server = readFileSync(serverSrc, 'utf8');
  server = replaceOnce(server, '/tmp/rxc/', `${configDir}/`, serverSrc);
  server = replaceOnce(server, '/usr/share/nginx/html', root, serverSrc);
  server = replaceOnce(server, '/etc/nginx/snippets/rxc-security-headers.conf', path.join(WEB_DIR, 'nginx/security-headers.conf'), serverSrc);
  writeFileSync(path.join(confd, 'default.conf'), server);
  makeReadable(prefix);

  const args = ['-p', prefix, '-c', path.join(prefix, 'nginx.conf'), '-e', path.join(prefix, 'error.log'), '-g', 'daemon off;'];
  const check = spawnSync(nginx, [...args, '-t'], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`nginx -t failed:\n${check.stderr}`);

  const proc: ChildProcess = spawn(nginx, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const origin = `http://127.0.0.1:${port}`;
  const errorLog = () => {
    try {
      return stderr + readFileSync(path.join(prefix, 'error.log'), 'utf8');
    } catch {
      return stderr;
    }
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`nginx exited with ${proc.exitCode}:\n${errorLog()}`);
    try {
      if ((await request(`${origin}/healthz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`nginx did not answer on ${origin}:\n${errorLog()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const stop = () =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', () => resolve());
      // QUIT: graceful shutdown of the master and its workers.
      proc.kill('SIGQUIT');
      setTimeout(() => proc.kill('SIGKILL'), 5000).unref();
    });
  // The master's worker processes (its children), as the kernel lists them.
  const workers = (): string[] => {
    try {
      return readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    } catch {
      return [];
    }
  };
  const reload = async () => {
    const old = new Set(workers());
    proc.kill('SIGHUP');
    // The master has read the new configuration once a worker it started after the signal runs.
    // Old workers may still answer a connection a client kept open: see awaitFreshCSP's callers.
    const until = Date.now() + 15_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`nginx exited on reload with ${proc.exitCode}:\n${errorLog()}`);
      if (old.size === 0 || workers().some((w) => !old.has(w))) break;
      if (Date.now() > until) throw new Error(`nginx started no worker with the new configuration:\n${errorLog()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    if ((await request(`${origin}/healthz`)).status !== 200) throw new Error(`nginx did not come back after reload:\n${errorLog()}`);
  };
  return { origin, port, root, configDir, stop, reload, errorLog };
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A plain HTTP request that neither decompresses nor follows redirects. */
export function request(url: string, opts: { method?: string; headers?: Record<string, string> } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'GET', headers: opts.headers, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: ${url}`)));
    req.on('error', reject);
    req.end();
  });
}
