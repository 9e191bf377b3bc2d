// The control plane the browser tests talk to, behind one function. By default a small fake that
// follows the control plane's contract (adapters/httpapi/controlapi/openapi.yaml); with RXC_E2E_API_BASE_URL set, a real control plane.
//
// Real control plane mode needs:
//   RXC_E2E_API_BASE_URL   e.g. http://127.0.0.1:5009
//   RXC_E2E_EMAIL, RXC_E2E_PASSWORD   an operator (controlplane create-operator)
//   RXC_E2E_SENSOR_CMD     a shell command that enrols a sensor agent with $RXC_CLAIM_CODE against
//                          $RXC_API_BASE_URL and keeps it running (it must answer start/stop)
//   RXC_E2E_WEB_PORT       port for nginx (default 8000); the control plane's CORS_ALLOWED_ORIGINS
//                          must contain http://localhost:<port>

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface E2eApi {
  baseUrl: string;
  email: string;
  password: string;
  /** What a sensor agent does with a claim code: redeem it and enrol. */
  enrolSensor: (claimCode: string, hostname: string) => Promise<void>;
  /** Only the fake can change its chat status; a real API is taken as it is. */
  setChatEnabled?: (enabled: boolean) => void;
  /** Only the fake: adds a provisioned tenant without going through the console. */
  seedTenant?: (id: string, name: string) => void;
  stop: () => Promise<void>;
}

export interface WebTarget {
  origin: string;
  host: string;
  port: number;
}

export function isRealApi(): boolean {
  return !!process.env.RXC_E2E_API_BASE_URL;
}

export async function startApi(web: WebTarget): Promise<E2eApi> {
  return isRealApi() ? realApi() : fakeApi(web.origin);
}

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`RXC_E2E_API_BASE_URL is set, so ${name} must be set too (see test/system/api.ts)`);
  return v;
}

async function realApi(): Promise<E2eApi> {
  const baseUrl = need('RXC_E2E_API_BASE_URL').replace(/\/+$/, '').replace(/\/api$/, '');
  const email = need('RXC_E2E_EMAIL');
  const password = need('RXC_E2E_PASSWORD');
  const cmd = need('RXC_E2E_SENSOR_CMD');
  const sensorAgents: ChildProcess[] = [];
  return {
    baseUrl,
    email,
    password,
    enrolSensor: async (claimCode, hostname) => {
      const p = spawn('sh', ['-c', cmd], { env: { ...process.env, RXC_CLAIM_CODE: claimCode, RXC_SENSOR_HOSTNAME: hostname, RXC_API_BASE_URL: baseUrl }, stdio: 'inherit' });
      sensorAgents.push(p);
    },
    stop: async () => {
      for (const p of sensorAgents) p.kill('SIGTERM');
    },
  };
}

// ---- the fake -------------------------------------------------------------------------------

interface FakeSensor {
  id: string;
  tenantId: string;
  name: string;
  state: string;
  lastSeenAt: string | null;
  certificate: { serial: string; notAfter: string } | null;
  lastCommand: { commandId: string; action: string; issuedAt: string; acknowledgedAt: string | null } | null;
  hostname: string;
  agentVersion: string;
  address: string;
  createdAt: string;
  history: FakeCommand[];
  labels?: Record<string, string>;
  decommissionedAt?: string | null;
}

interface FakeCommand {
  commandId: string;
  action: string;
  issuedAt: string;
  issuedBy: string;
  expiresAt: string;
  status: string;
  acknowledgedAt: string | null;
  failedAt: string | null;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const EMAIL = 'operator@example.com';
const PASSWORD = 'correct horse battery staple';
const ACK_DELAY_MS = 700;

// The fake's threat intelligence: one address it knows, everything else a miss.
const KNOWN_INDICATORS: Record<string, string> = { '203.0.113.7': 'Known scanner' };
const IPV4 = /\b(?:\d{1,3}\.){3}\d{1,3}\b/g;

/** A deterministic overview for any tenant and range: a known scanner and an address nobody knows. */
function fakeOverview(tenantId: string, from: string, to: string, sensorId: string | null) {
  const f = Date.parse(from);
  const t = Date.parse(to);
  if (Number.isNaN(f) || Number.isNaN(t) || t <= f) throw new HttpProblem(400, 'invalid_input', 'Invalid input', 'from and to must be RFC 3339 times, to after from');
  if (t - f > 31 * 86400_000) throw new HttpProblem(400, 'invalid_input', 'Invalid input', 'the range must not exceed 31 days');
  const span = t - f;
  const bucket = span <= 6 * 3600_000 ? 60 : span <= 48 * 3600_000 ? 300 : span <= 14 * 86400_000 ? 3600 : 86400;
  const series = [];
  for (let b = Math.floor(f / (bucket * 1000)) * bucket * 1000, i = 0; b < t; b += bucket * 1000, i++) {
    const events = (i * 7) % 23;
    series.push({ t: new Date(b).toISOString().replace('.000Z', 'Z'), events, alerts: events % 4 });
  }
  const events = series.reduce((n, p) => n + p.events, 0);
  const alerts = series.reduce((n, p) => n + p.alerts, 0);
  return {
    tenantId,
    from: new Date(f).toISOString().replace('.000Z', 'Z'),
    to: new Date(t).toISOString().replace('.000Z', 'Z'),
    bucketSeconds: bucket,
    totals: { events, alerts, sensors: sensorId ? 1 : 2 },
    series,
    topSources: [
      { ip: '203.0.113.7', count: Math.ceil(events / 3) },
      { ip: '198.51.100.23', count: Math.ceil(events / 5) },
    ],
    topDestinations: [{ ip: '10.0.0.5', count: Math.ceil(events / 2) }],
    topSignatures: [{ signatureId: 2001219, signature: 'ET SCAN Potential SSH Scan', category: 'Attempted Information Leak', severity: 2, count: alerts }],
    cves: [{ id: 'CVE-2021-44228', count: 3, lastSeen: new Date(t - 60_000).toISOString() }],
  };
}

class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly title: string,
    readonly detail?: string,
  ) {
    super(title);
  }
}

async function fakeApi(webOrigin: string): Promise<E2eApi> {
  const sessions = new Set<string>();
  const tenants: { id: string; name: string; natsAccountPubKey: string; natsStatus: string }[] = [];
  const codes: { id: string; tenantId: string; code: string; expiresAt: string; sensorName?: string; usedAt?: string; revokedAt?: string }[] = [];
  const sensors: FakeSensor[] = [];
  const batches = new Map<string, FakeCommand[]>();
  const batchLog: { batchId: string; action: string; createdAt: string }[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let chatEnabled = true;
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  const matching = (q: URLSearchParams) => {
    const tenantId = q.get('tenantId');
    const state = q.get('state');
    const text = q.get('q')?.toLowerCase();
    const labels = q.getAll('label').map((l) => l.split('='));
    return sensors.filter(
      (s) =>
        !s.decommissionedAt &&
        labels.every(([k, v]) => s.labels?.[k] === v) &&
        (!tenantId || s.tenantId === tenantId) &&
        (!state || s.state === state) &&
        (!text || [s.id, s.name, s.hostname].some((v) => v.toLowerCase().includes(text))),
    );
  };
  /** A command to one sensor: the stream takes it at once, the sensor acknowledges a moment later (a revoked one fails). */
  const command = (s: FakeSensor, action: string): FakeCommand => {
    const now = new Date().toISOString();
    const cmd: FakeCommand = { commandId: randomUUID(), action, issuedAt: now, issuedBy: EMAIL, expiresAt: new Date(Date.now() + 300_000).toISOString(), status: 'pending', acknowledgedAt: null, failedAt: null };
    s.history.unshift(cmd);
    if (s.state === 'revoked') {
      cmd.status = 'failed';
      cmd.failedAt = now;
      return cmd;
    }
    cmd.status = 'accepted';
    s.lastCommand = cmd;
    // The sensor agent acknowledges over NATS a moment later.
    later(ACK_DELAY_MS, () => {
      const at = new Date().toISOString();
      cmd.acknowledgedAt = at;
      s.lastSeenAt = at;
      s.state = action === 'start' ? 'running' : 'stopped';
    });
    return cmd;
  };

  const server = http.createServer(async (req, res) => {
    const origin = req.headers.origin;
    if (origin === webOrigin) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Vary', 'Origin');
    }
    if (req.method === 'OPTIONS') {
      res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PATCH, DELETE');
      res.setHeader('Access-Control-Allow-Headers', 'Content-Type, Accept, Idempotency-Key');
      res.setHeader('Access-Control-Max-Age', '600');
      res.writeHead(204).end();
      return;
    }
    try {
      await route(req, res);
    } catch (err) {
      const p = err instanceof HttpProblem ? err : new HttpProblem(500, 'internal', 'Internal error');
      res.writeHead(p.status, { 'Content-Type': 'application/problem+json' });
      res.end(JSON.stringify({ type: 'about:blank', status: p.status, code: p.code, title: p.title, detail: p.detail }));
    }
  });

  async function body(req: http.IncomingMessage): Promise<Record<string, unknown>> {
    let raw = '';
    for await (const chunk of req) {
      raw += chunk;
      if (raw.length > 65536) throw new HttpProblem(413, 'body_too_large', 'Request body too large');
    }
    if (!raw) return {};
    try {
      return JSON.parse(raw);
    } catch {
      throw new HttpProblem(400, 'malformed_json', 'Malformed JSON');
    }
  }

  function send(res: http.ServerResponse, status: number, value?: unknown) {
    if (value === undefined) {
      res.writeHead(status).end();
      return;
    }
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(value));
  }

  function session(req: http.IncomingMessage) {
    const m = /(?:^|;\s*)rxc_session=([^;]+)/.exec(req.headers.cookie ?? '');
    if (!m || !sessions.has(m[1])) throw new HttpProblem(401, 'unauthenticated', 'Not signed in', 'Sign in to continue.');
    return m[1];
  }

  function checkOrigin(req: http.IncomingMessage) {
    if (req.headers.origin !== webOrigin) throw new HttpProblem(403, 'bad_origin', 'Origin not allowed');
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const p = url.pathname;
    const m = req.method ?? 'GET';
    let g: RegExpExecArray | null;

    if (m === 'POST' && p === '/api/auth/login') {
      checkOrigin(req);
      const b = await body(req);
      if (b.email !== EMAIL || b.password !== PASSWORD) throw new HttpProblem(401, 'invalid_credentials', 'Wrong email or password');
      const token = randomBytes(16).toString('hex');
      sessions.add(token);
      res.setHeader('Set-Cookie', `rxc_session=${token}; Path=/; HttpOnly; SameSite=Lax`);
      return send(res, 204);
    }
    if (m === 'POST' && p === '/api/auth/logout') {
      checkOrigin(req);
      try {
        sessions.delete(session(req));
      } catch {
        // already signed out
      }
      res.setHeader('Set-Cookie', 'rxc_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0');
      return send(res, 204);
    }
    // Single sign-on offered, as a control plane with OIDC_ISSUER_URL does (the login page's button).
    if (m === 'GET' && p === '/api/auth/providers') return send(res, 200, { oidc: { displayName: 'Example SSO', loginUrl: '/api/auth/oidc/login' } });
    session(req);
    if (m !== 'GET') checkOrigin(req);

    if (m === 'GET' && p === '/api/auth/me') return send(res, 200, { id: 'op-fake', email: EMAIL, role: 'admin', tenants: [] });
    if (m === 'GET' && p === '/api/tenants') return send(res, 200, { items: tenants });
    if (m === 'POST' && p === '/api/tenants') {
      const b = await body(req);
      if (typeof b.id !== 'string' || !ID.test(b.id)) throw new HttpProblem(400, 'invalid_id', 'Invalid tenant ID');
      if (typeof b.name !== 'string' || !b.name) throw new HttpProblem(400, 'invalid_name', 'A name is required');
      if (tenants.some((t) => t.id === b.id)) throw new HttpProblem(409, 'tenant_exists', 'Tenant already exists');
      const t = { id: b.id, name: b.name, natsAccountPubKey: '', natsStatus: 'pending' };
      tenants.push(t);
      // The provisioner answers in the background.
      later(800, () => Object.assign(t, { natsStatus: 'provisioned', natsAccountPubKey: `A${randomBytes(28).toString('hex').toUpperCase().slice(0, 55)}` }));
      return send(res, 201, t);
    }
    if ((g = /^\/api\/tenants\/([^/]+)\/claim-codes$/.exec(p))) {
      const tenantId = decodeURIComponent(g[1]);
      if (!tenants.some((t) => t.id === tenantId)) throw new HttpProblem(404, 'tenant_not_found', 'Tenant not found');
      if (m === 'GET') return send(res, 200, { items: codes.filter((c) => c.tenantId === tenantId).map(({ code: _code, tenantId: _t, ...rest }) => rest) });
      if (m === 'POST') {
        const b = await body(req);
        const ttl = typeof b.ttlSeconds === 'number' ? b.ttlSeconds : 86400;
        const c = {
          id: randomUUID(),
          tenantId,
          code: randomBytes(10).toString('base64url').toUpperCase(),
          expiresAt: new Date(Date.now() + ttl * 1000).toISOString(),
          sensorName: typeof b.sensorName === 'string' ? b.sensorName : undefined,
        };
        codes.push(c);
        return send(res, 201, { id: c.id, code: c.code, expiresAt: c.expiresAt });
      }
    }
    if (m === 'DELETE' && (g = /^\/api\/claim-codes\/([^/]+)$/.exec(p))) {
      const c = codes.find((x) => x.id === decodeURIComponent(g![1]));
      if (!c) throw new HttpProblem(404, 'claim_code_not_found', 'Claim code not found');
      c.revokedAt = new Date().toISOString();
      return send(res, 204);
    }
    if (m === 'GET' && p === '/api/sensors/summary') {
      const tenantId = url.searchParams.get('tenantId');
      const byState: Record<string, number> = {};
      const rows = sensors.filter((s) => !tenantId || s.tenantId === tenantId);
      for (const s of rows) byState[s.state] = (byState[s.state] ?? 0) + 1;
      return send(res, 200, { total: rows.length, byState });
    }
    if (m === 'GET' && p === '/api/sensors') {
      // Filters, search, sort and keyset paging as the control plane does them (the cursor here is
      // the last sort key shown, in the clear).
      const sort = url.searchParams.get('sort') || 'name';
      const desc = sort.startsWith('-');
      const field = ({ name: 'name', state: 'state', lastSeen: 'lastSeenAt', createdAt: 'createdAt' } as Record<string, keyof FakeSensor>)[desc ? sort.slice(1) : sort];
      if (!field) throw new HttpProblem(400, 'invalid_sort', 'Invalid sort', `unknown sort ${sort}`);
      const limit = Math.min(500, Number(url.searchParams.get('limit') || 50));
      const key = (s: FakeSensor) => `${String(s[field] ?? '')}\u0000${s.id}`;
      const rows = matching(url.searchParams).sort((a, b) => (desc ? -1 : 1) * key(a).localeCompare(key(b)));
      const cursor = url.searchParams.get('cursor');
      const start = cursor ? rows.findIndex((s) => (desc ? key(s).localeCompare(cursor) < 0 : key(s).localeCompare(cursor) > 0)) : 0;
      const items = start < 0 ? [] : rows.slice(start, start + limit);
      const more = start >= 0 && start + limit < rows.length;
      return send(res, 200, { items: items.map(({ history: _h, ...rest }) => rest), nextCursor: more ? key(items[items.length - 1]) : null });
    }
    if (m === 'POST' && p === '/api/commands') {
      const b = await body(req);
      if (b.action !== 'start' && b.action !== 'stop') throw new HttpProblem(400, 'invalid_action', 'Action must be start or stop');
      const filter = (b.filter ?? {}) as Record<string, string>;
      const targets = Array.isArray(b.sensorIds) ? sensors.filter((s) => (b.sensorIds as string[]).includes(s.id)) : matching(new URLSearchParams(filter));
      if (url.searchParams.get('dryRun') === 'true') return send(res, 200, { matched: targets.length, total: targets.length, skippedRevoked: 0, skippedNotEnrolled: 0 });
      const batchId = randomUUID();
      const cmds = targets.map((s) => command(s, b.action as string));
      batches.set(batchId, cmds);
      batchLog.unshift({ batchId, action: b.action as string, createdAt: new Date().toISOString() });
      return send(res, 202, { batchId, total: cmds.length, pending: cmds.length, accepted: 0, acknowledged: 0, failed: 0, done: cmds.length === 0 });
    }
    if (m === 'GET' && p === '/api/commands/batches') {
      const items = batchLog.map((b) => {
        const cmds = batches.get(b.batchId)!;
        const count = (f: (c: FakeCommand) => boolean) => cmds.filter(f).length;
        const pending = count((c) => c.status === 'pending');
        return { ...b, createdBy: 'admin', tenantIds: [], matched: cmds.length, total: cmds.length, pending, accepted: count((c) => c.status === 'accepted'), acknowledged: count((c) => !!c.acknowledgedAt), failed: count((c) => c.status === 'failed'), done: pending === 0 };
      });
      return send(res, 200, { items, nextCursor: null });
    }
    if (m === 'GET' && (g = /^\/api\/commands\/batches\/([^/]+)$/.exec(p))) {
      const cmds = batches.get(decodeURIComponent(g[1]));
      if (!cmds) throw new HttpProblem(404, 'not_found', 'Not found');
      const count = (f: (c: FakeCommand) => boolean) => cmds.filter(f).length;
      return send(res, 200, {
        total: cmds.length,
        accepted: count((c) => c.status === 'accepted'),
        acknowledged: count((c) => !!c.acknowledgedAt),
        failed: count((c) => c.status === 'failed'),
        pending: count((c) => c.status === 'pending'),
      });
    }
    if ((g = /^\/api\/sensors\/([^/]+)(\/commands|\/revoke)?$/.exec(p))) {
      const s = sensors.find((x) => x.id === decodeURIComponent(g![1]));
      if (!s) throw new HttpProblem(404, 'sensor_not_found', 'Sensor not found');
      if (m === 'GET' && !g[2]) return send(res, 200, { ...s, labels: s.labels ?? {}, history: undefined });
      if (m === 'PATCH' && !g[2]) {
        if (s.decommissionedAt) throw new HttpProblem(409, 'sensor_decommissioned', 'Sensor decommissioned');
        const b = await body(req);
        const labels = { ...(s.labels ?? {}) };
        for (const [k, v] of Object.entries((b.labels ?? {}) as Record<string, string | null>)) {
          if (!/^[a-z0-9][a-z0-9._-]{0,62}$/.test(k) || (v !== null && !/^[A-Za-z0-9._-]{0,63}$/.test(v))) throw new HttpProblem(400, 'invalid_labels', 'Invalid labels', `key "${k}"`);
          if (v === null) delete labels[k];
          else labels[k] = v;
        }
        s.labels = labels;
        if (typeof b.name === 'string' && b.name) s.name = b.name;
        return send(res, 200, { ...s, history: undefined });
      }
      if (m === 'DELETE' && !g[2]) {
        if (s.decommissionedAt) throw new HttpProblem(409, 'sensor_decommissioned', 'Sensor decommissioned');
        s.state = 'revoked';
        s.decommissionedAt = new Date().toISOString();
        return send(res, 204);
      }
      if (m === 'GET' && g[2] === '/commands') {
        const start = Number(url.searchParams.get('cursor') || 0);
        const limit = Number(url.searchParams.get('limit') || 50);
        return send(res, 200, { items: s.history.slice(start, start + limit), nextCursor: start + limit < s.history.length ? String(start + limit) : null });
      }
      if (m === 'POST' && g[2] === '/commands') {
        const b = await body(req);
        if (b.action !== 'start' && b.action !== 'stop') throw new HttpProblem(400, 'invalid_action', 'Action must be start or stop');
        if (s.state === 'revoked') throw new HttpProblem(409, 'sensor_revoked', 'Sensor is revoked');
        return send(res, 202, { commandId: command(s, b.action as string).commandId });
      }
      if (m === 'POST' && g[2] === '/revoke') {
        s.state = 'revoked';
        return send(res, 204);
      }
    }
    if (m === 'GET' && p === '/api/analytics/chat/status') {
      return send(res, 200, chatEnabled ? { enabled: true, model: 'fake-llm-1', capabilities: { threatIntel: true, historicalEnrichment: false, playbooks: true } } : { enabled: false });
    }
    if (m === 'GET' && p === '/api/analytics/overview') {
      const tenantId = url.searchParams.get('tenantId') ?? '';
      if (!ID.test(tenantId)) throw new HttpProblem(400, 'invalid_id', 'Invalid identifier');
      if (!tenants.some((t) => t.id === tenantId)) throw new HttpProblem(404, 'not_found', 'Not found', 'no such tenant');
      return send(res, 200, fakeOverview(tenantId, url.searchParams.get('from') ?? '', url.searchParams.get('to') ?? '', url.searchParams.get('sensorId')));
    }
    if (m === 'POST' && p === '/api/analytics/chat') {
      if (!chatEnabled) throw new HttpProblem(404, 'chat_disabled', 'Analytics chat is disabled');
      const b = await body(req);
      if (typeof b.question !== 'string' || !b.question.trim() || b.question.length > 2000) throw new HttpProblem(400, 'invalid_input', 'Invalid input');
      if (JSON.stringify(b.snapshot ?? {}).length > 16384) throw new HttpProblem(413, 'snapshot_too_large', 'Snapshot too large');
      // Like the control plane: indicators from the question and the snapshot, a chip per hit.
      const indicators = [...new Set(`${b.question} ${JSON.stringify(b.snapshot ?? {})}`.match(IPV4) ?? [])];
      const hits = indicators.filter((i) => KNOWN_INDICATORS[i]);
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store' });
      const ev = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      for (const hit of hits) {
        ev('enrichment', { kind: 'threatIntel', indicator: hit, title: KNOWN_INDICATORS[hit], detail: 'MISP event 4711' });
        ev('enrichment', { kind: 'historical', indicator: hit, title: 'Seen 12 times', detail: 'last 30 days' });
      }
      if (hits.length > 0) ev('enrichment', { kind: 'playbook', indicator: 'ET SCAN', title: 'Scanner triage', detail: 'playbooks/scan.md' });
      const answer = hits.length
        ? `For tenant ${String(b.tenantId)}: ${hits.join(', ')} is a known scanner; block it at the edge.`
        : `For tenant ${String(b.tenantId)}: nothing known about ${indicators.join(', ') || 'these addresses'}; keep watching.`;
      for (const word of answer.split(' ')) {
        ev('delta', { text: `${word} ` });
        await new Promise((r) => setTimeout(r, 20));
      }
      ev('done', { model: 'fake-llm-1' });
      res.end();
      return;
    }
    throw new HttpProblem(404, 'not_found', 'Not found');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    email: EMAIL,
    password: PASSWORD,
    enrolSensor: async (claimCode, hostname) => {
      const c = codes.find((x) => x.code === claimCode && !x.usedAt && !x.revokedAt && new Date(x.expiresAt).getTime() > Date.now());
      if (!c) throw new Error('invalid_claim_code');
      c.usedAt = new Date().toISOString();
      sensors.push({
        id: `s-${randomBytes(4).toString('hex')}`,
        tenantId: c.tenantId,
        name: c.sensorName || hostname,
        state: 'online',
        lastSeenAt: new Date().toISOString(),
        certificate: { serial: randomBytes(16).toString('hex'), notAfter: new Date(Date.now() + 7 * 86400_000).toISOString() },
        lastCommand: null,
        hostname,
        agentVersion: 'fake-1.0.0',
        address: '127.0.0.1',
        createdAt: new Date().toISOString(),
        history: [],
      });
    },
    setChatEnabled: (enabled) => {
      chatEnabled = enabled;
    },
    seedTenant: (id, name) => {
      tenants.push({ id, name, natsAccountPubKey: `A${randomBytes(28).toString('hex').toUpperCase().slice(0, 55)}`, natsStatus: 'provisioned' });
    },
    stop: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
