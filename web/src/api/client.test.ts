import { describe, expect, it, vi } from 'vitest';
import { BASE, fakeFetch, html, json, problem } from '../test-utils';
import { ApiClient, ApiError, parseRetryAfter, PREFETCH_TTL_MS } from './client';

function client(routes: Parameters<typeof fakeFetch>[0], onUnauthorized = vi.fn()) {
  const f = fakeFetch(routes);
  return { api: new ApiClient({ baseUrl: BASE, fetch: f.fetch, onUnauthorized }), f, onUnauthorized };
}

async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected the call to fail');
}

describe('ApiClient', () => {
  it('sends every request under /api with credentials and JSON', async () => {
    const { api, f } = client({ 'POST /api/tenants': () => json(201, { id: 'acme', name: 'Acme', natsStatus: 'pending' }) });
    const t = await api.createTenant('acme', 'Acme');
    expect(t.id).toBe('acme');
    expect(f.calls[0].url.href).toBe(`${BASE}/api/tenants`);
    expect(f.calls[0].init.credentials).toBe('include');
    expect(f.calls[0].body).toEqual({ id: 'acme', name: 'Acme' });
    expect((f.calls[0].init.headers as Record<string, string>)['Content-Type']).toBe('application/json');
  });

  it('puts only set filters in the sensor query', async () => {
    const { api, f } = client({ 'GET /api/sensors': () => json(200, { items: [] }) });
    await api.listSensors({ tenantId: 'acme', state: '' });
    expect(f.calls[0].url.search).toBe('?tenantId=acme');
  });

  it('pages, searches and sorts sensors in the query, and reads the summary and command history', async () => {
    const { api, f } = client({
      'GET /api/sensors': () => json(200, { items: [], nextCursor: 'c2' }),
      'GET /api/sensors/summary': () => json(200, { total: 3, byState: { running: 3 } }),
      'GET /api/sensors/s%201/commands': () => json(200, { items: [], nextCursor: null }),
    });
    const page = await api.listSensors({ tenantId: 'acme', q: 'fra & co', sort: '-lastSeenAt', limit: 100, cursor: 'c1' });
    expect(page.nextCursor).toBe('c2');
    expect(Object.fromEntries(f.calls[0].url.searchParams)).toEqual({ tenantId: 'acme', q: 'fra & co', sort: '-lastSeenAt', limit: '100', cursor: 'c1' });
    await expect(api.sensorSummary(undefined)).resolves.toEqual({ total: 3, byState: { running: 3 } });
    expect(f.calls[1].url.search).toBe('');
    await api.sensorSummary('acme');
    expect(f.calls[2].url.search).toBe('?tenantId=acme');
    await api.sensorCommands('s 1', { limit: 20, cursor: 'x' });
    expect(f.calls[3].url.pathname).toBe('/api/sensors/s%201/commands');
    expect(f.calls[3].url.search).toBe('?limit=20&cursor=x');
  });

  it('hands a prefetched page to the request it was made for, once, and only a success', async () => {
    let status = 200;
    const { api, f, onUnauthorized } = client({
      'GET /api/sensors': () => (status === 200 ? json(200, { items: [{ id: `s${f.calls.length}` }], nextCursor: null }) : problem(status, 'unauthorized', 'Not signed in')),
      'GET /api/sensors/summary': () => json(200, { total: 1, byState: {} }),
    });
    api.prefetchSensors({ tenantId: 'acme', sort: 'name', limit: 50 });
    expect(f.calls.map((c) => c.url.pathname + c.url.search)).toEqual(['/api/sensors?tenantId=acme&sort=name&limit=50', '/api/sensors/summary?tenantId=acme']);
    const page = await api.listSensors({ tenantId: 'acme', sort: 'name', limit: 50 });
    await api.sensorSummary('acme');
    expect(page.items[0].id).toBe('s1');
    expect(f.calls).toHaveLength(2);
    // Taken once: the next poll asks again.
    await api.listSensors({ tenantId: 'acme', sort: 'name', limit: 50 });
    expect(f.calls).toHaveLength(3);
    // Another query does not take it.
    api.prefetch('/sensors', { tenantId: 'beta' });
    await api.listSensors({ tenantId: 'acme', sort: 'name', limit: 50 });
    expect(f.calls).toHaveLength(5);
    // A refused prefetch is dropped: the request itself is sent and reports the 401.
    status = 401;
    api.prefetch('/sensors', { tenantId: 'gamma' });
    await failure(api.listSensors({ tenantId: 'gamma' }));
    expect(f.calls).toHaveLength(7);
    expect(onUnauthorized).toHaveBeenCalledTimes(1);
  });

  it('lets a prefetched answer go stale', async () => {
    vi.useFakeTimers({ now: 0 });
    try {
      const { api, f } = client({ 'GET /api/sensors': () => json(200, { items: [] }) });
      api.prefetch('/sensors');
      vi.setSystemTime(PREFETCH_TTL_MS + 1);
      await api.listSensors({});
      expect(f.calls).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('sends a bulk command and reads its batch', async () => {
    const { api, f } = client({
      'POST /api/commands': () => json(202, { batchId: 'b/1', total: 2 }),
      'GET /api/commands/batches/b%2F1': () => json(200, { total: 2, accepted: 1, acknowledged: 0, failed: 0, pending: 1 }),
    });
    const { batchId } = await api.sendBulkCommand({ action: 'stop', filter: { tenantId: 'acme', state: 'running' } });
    expect(f.calls[0].body).toEqual({ action: 'stop', filter: { tenantId: 'acme', state: 'running' } });
    await expect(api.batchProgress(batchId)).resolves.toMatchObject({ accepted: 1, pending: 1 });
  });

  it('accepts 204 for login and sends the credentials body', async () => {
    const { api, f } = client({ 'POST /api/auth/login': () => new Response(null, { status: 204 }) });
    await api.login('a@b.c', 'pw');
    expect(f.calls[0].body).toEqual({ email: 'a@b.c', password: 'pw' });
    expect(f.calls[0].init.credentials).toBe('include');
  });

  it('maps problem+json to code, title, detail and status', async () => {
    const { api } = client({ 'POST /api/tenants': () => problem(409, 'tenant_exists', 'Tenant exists', 'acme is taken') });
    const err = await failure(api.createTenant('acme', 'Acme'));
    expect(err).toMatchObject({ kind: 'problem', status: 409, code: 'tenant_exists', title: 'Tenant exists', detail: 'acme is taken' });
  });

  it('reports 401 to onUnauthorized and throws an unauthorized error', async () => {
    const { api, onUnauthorized } = client({ 'GET /api/tenants': () => problem(401, 'session_expired', 'Session expired') });
    const err = await failure(api.listTenants());
    expect(err.kind).toBe('unauthorized');
    expect(err.code).toBe('session_expired');
    expect(onUnauthorized).toHaveBeenCalledTimes(1);
  });

  it('treats a 401 without a body as unauthorized too', async () => {
    const { api, onUnauthorized } = client({ 'GET /api/auth/me': () => new Response('', { status: 401 }) });
    expect((await failure(api.me())).kind).toBe('unauthorized');
    expect(onUnauthorized).toHaveBeenCalled();
  });

  it('does not call onUnauthorized for other failures', async () => {
    const { api, onUnauthorized } = client({ 'GET /api/tenants': () => problem(500, 'internal', 'Internal error') });
    expect((await failure(api.listTenants())).kind).toBe('problem');
    expect(onUnauthorized).not.toHaveBeenCalled();
  });

  it('says the API is unreachable when fetch itself fails', async () => {
    const api = new ApiClient({ baseUrl: BASE, fetch: () => Promise.reject(new TypeError('Failed to fetch')) });
    const err = await failure(api.me());
    expect(err.kind).toBe('unreachable');
    expect(err.detail).toContain(BASE);
  });

  it('says the base URL is wrong when an HTML page answers with 200', async () => {
    const { api } = client({ 'GET /api/auth/me': () => html(200) });
    const err = await failure(api.me());
    expect(err.kind).toBe('misconfigured');
    expect(err.detail).toMatch(/text\/html/);
  });

  it('says the base URL is wrong on a plain 404', async () => {
    const { api } = client({ 'GET /api/auth/me': () => new Response('404 page not found', { status: 404, headers: { 'Content-Type': 'text/plain' } }) });
    expect((await failure(api.me())).kind).toBe('misconfigured');
  });

  it('keeps a 404 problem from the API as a problem', async () => {
    const { api } = client({ 'GET /api/sensors/nope': () => problem(404, 'sensor_not_found', 'Sensor not found') });
    const err = await failure(api.getSensor('nope'));
    expect(err).toMatchObject({ kind: 'problem', code: 'sensor_not_found', status: 404 });
  });

  it('maps a body that is not JSON to a wrong base URL', async () => {
    const { api } = client({ 'GET /api/tenants': () => new Response('{oops', { status: 200, headers: { 'Content-Type': 'application/json' } }) });
    expect((await failure(api.listTenants())).kind).toBe('misconfigured');
  });

  it('escapes ids in paths', async () => {
    const { api, f } = client({ 'DELETE /api/claim-codes/a%2Fb': () => new Response(null, { status: 204 }) });
    await api.revokeClaimCode('a/b');
    expect(f.calls[0].url.pathname).toBe('/api/claim-codes/a%2Fb');
  });

  it('sends start and stop commands', async () => {
    const { api, f } = client({ 'POST /api/sensors/s1/commands': () => json(202, { commandId: 'c1' }) });
    expect(await api.sendCommand('s1', 'stop')).toEqual({ commandId: 'c1' });
    expect(f.calls[0].body).toEqual({ action: 'stop' });
  });

  it('asks for the analytics overview with the query in the URL', async () => {
    const ov = { tenantId: 'acme', from: 'a', to: 'b', bucketSeconds: 60, totals: { events: 1, alerts: 0, sensors: 1 }, series: [], topSources: [], topDestinations: [], topSignatures: [], cves: [] };
    const { api, f } = client({ 'GET /api/analytics/overview': () => json(200, ov) });
    expect(await api.analyticsOverview({ tenantId: 'acme', from: '2026-11-20T10:00:00Z', to: '2026-11-20T11:00:00Z', limit: 10 })).toEqual(ov);
    const q = f.calls[0].url.searchParams;
    expect([...q.keys()].sort()).toEqual(['from', 'limit', 'tenantId', 'to']);
    expect(q.get('from')).toBe('2026-11-20T10:00:00Z');
    expect(q.get('limit')).toBe('10');
    await api.analyticsOverview({ tenantId: 'acme', from: 'x', to: 'y', sensorId: 's1' });
    expect(f.calls[1].url.searchParams.get('sensorId')).toBe('s1');
    expect(f.calls[1].url.searchParams.has('limit')).toBe(false);
  });

  it('reports the overview problems the API answers', async () => {
    const { api } = client({ 'GET /api/analytics/overview': () => problem(400, 'invalid_input', 'Invalid input', 'invalid input: the range must not exceed 31 days') });
    const err = await failure(api.analyticsOverview({ tenantId: 'acme', from: 'x', to: 'y' }));
    expect(err.kind).toBe('problem');
    expect(err.code).toBe('invalid_input');
    expect(err.detail).toContain('31 days');
  });

  const SNAP = { from: '2026-11-20T10:00:00Z', to: '2026-11-20T11:00:00Z' };

  it('opens the chat stream only when the answer is an event stream', async () => {
    const { api } = client({
      'POST /api/analytics/chat': () => new Response('event: done\ndata: {}\n\n', { status: 200, headers: { 'Content-Type': 'text/event-stream; charset=utf-8' } }),
    });
    const res = await api.chat({ tenantId: 't', question: 'q', snapshot: SNAP });
    expect(await res.text()).toContain('event: done');
    const html = client({ 'POST /api/analytics/chat': () => new Response('<html>', { status: 200, headers: { 'Content-Type': 'text/html' } }) });
    expect((await failure(html.api.chat({ tenantId: 't', question: 'q', snapshot: SNAP }))).kind).toBe('misconfigured');
  });
});

describe('roles, tokens and the audit trail', () => {
  it('maps 403 forbidden to a forbidden error that is not a session end', async () => {
    const { api, onUnauthorized } = client({ 'POST /api/tenants': () => problem(403, 'forbidden', 'Forbidden', 'your role does not allow this action here') });
    const err = await failure(api.createTenant('acme', 'Acme'));
    expect(err.kind).toBe('forbidden');
    expect(err.status).toBe(403);
    expect(err.title).toBe('Not allowed');
    expect(onUnauthorized).not.toHaveBeenCalled();
  });

  it('keeps other 403s as the problem the API reported', async () => {
    const { api } = client({ 'POST /api/tenants': () => problem(403, 'origin_not_allowed', 'Origin not allowed') });
    const err = await failure(api.createTenant('acme', 'Acme'));
    expect(err.kind).toBe('problem');
    expect(err.code).toBe('origin_not_allowed');
  });

  it('reads Retry-After in seconds or as a date', async () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-5', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
    const { api } = client({
      'POST /api/auth/login': () => {
        const r = problem(429, 'login_throttled', 'Too many failed logins');
        r.headers.set('Retry-After', '17');
        return r;
      },
    });
    const err = await failure(api.login('a@b.c', 'pw'));
    expect([err.code, err.retryAfter]).toEqual(['login_throttled', 17]);
  });

  it('lists own tokens without operatorId, an operator’s with it, and every operator’s with it empty', async () => {
    const { api, f } = client({ 'GET /api/tokens': () => json(200, { items: [] }) });
    await api.listTokens();
    await api.listTokens('op-2');
    await api.listTokens('');
    expect(f.calls.map((c) => c.url.search)).toEqual(['', '?operatorId=op-2', '?operatorId=']);
  });

  it('puts only set audit filters and the cursor in the query', async () => {
    const { api, f } = client({ 'GET /api/audit': () => json(200, { items: [], nextCursor: '' }) });
    await api.listAudit({ tenantId: '', actor: 'a@b.c', action: 'auth.login', cursor: 'abc', limit: 50 });
    expect(f.calls[0].url.search).toBe('?actor=a%40b.c&action=auth.login&cursor=abc&limit=50');
  });

  it('patches operators and escapes ids in paths', async () => {
    const { api, f } = client({ 'PATCH /api/operators/op%2F1': () => json(200, { id: 'op/1' }) });
    await api.updateOperator('op/1', { disabled: true });
    expect(f.calls[0].method).toBe('PATCH');
    expect(f.calls[0].body).toEqual({ disabled: true });
  });
});
