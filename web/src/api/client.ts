// The one place that talks HTTP to the control plane. Every failure becomes an ApiError whose
// kind tells the operator what went wrong: a rejected session, an API that cannot be reached,
// a base URL that points at something other than the API, an action the operator's role does
// not allow, or another problem the API reported.

import type {
  AnalyticsSnapshot,
  ApiToken,
  AuditPage,
  AuditQuery,
  ChatStatus,
  ClaimCode,
  CreatedApiToken,
  IssuedClaimCode,
  Items,
  Me,
  AuthProviders,
  AuthSettings,
  SecondFactor,
  TotpEnrolment,
  NewApiToken,
  NewOperator,
  Operator,
  OperatorUpdate,
  BatchProgress,
  BatchSummary,
  BulkCommand,
  Command,
  Overview,
  OverviewQuery,
  Page,
  Sensor,
  SensorPage,
  SensorPatch,
  SensorQuery,
  SensorSummary,
  Tenant,
} from './types';

/** 'forbidden': the API answered 403 forbidden, the principal's role does not allow the action. */
export type ApiErrorKind = 'unauthorized' | 'unreachable' | 'misconfigured' | 'forbidden' | 'problem';

export class ApiError extends Error {
  readonly kind: ApiErrorKind;
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  /** Seconds the API asked to wait (Retry-After), when it said so. */
  readonly retryAfter?: number;

  constructor(kind: ApiErrorKind, init: { status?: number; code?: string; title: string; detail?: string; retryAfter?: number }) {
    super(init.detail ? `${init.title}: ${init.detail}` : init.title);
    this.name = 'ApiError';
    this.kind = kind;
    this.status = init.status ?? 0;
    this.code = init.code ?? kind;
    this.title = init.title;
    this.detail = init.detail ?? '';
    this.retryAfter = init.retryAfter;
  }
}

/** Retry-After as whole seconds from now: delta-seconds or an HTTP date; undefined when absent or bad. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  // An HTTP date starts with the day's name ("Sun, 06 Nov 1994 08:49:37 GMT"); Date.parse alone
  // would also take "-5" for a year.
  if (!/^[A-Za-z]{3}/.test(v)) return undefined;
  const t = Date.parse(v);
  if (Number.isNaN(t)) return undefined;
  return Math.max(0, Math.ceil((t - now) / 1000));
}

export interface ApiClientOptions {
  baseUrl: string;
  fetch?: typeof fetch;
  /** Called on every 401, before the error is thrown, so the app can return to the login page. */
  onUnauthorized?: (err: ApiError) => void;
}

type Query = Record<string, string | string[] | undefined>;

function isJson(contentType: string | null): boolean {
  return !!contentType && /^application\/([\w.+-]+\+)?json\b/i.test(contentType);
}

function isProblem(contentType: string | null): boolean {
  return !!contentType && /^application\/problem\+json\b/i.test(contentType);
}

/** How long a prefetched answer may wait for the request it was made for. */
export const PREFETCH_TTL_MS = 10_000;

export class ApiClient {
  readonly baseUrl: string;
  private readonly fetchFn: typeof fetch;
  private readonly onUnauthorized?: (err: ApiError) => void;
  private readonly warm = new Map<string, { at: number; res: Promise<Response | null> }>();

  constructor(opts: ApiClientOptions) {
    this.baseUrl = opts.baseUrl;
    this.fetchFn = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.onUnauthorized = opts.onUnauthorized;
  }

  url(path: string, query?: Query): string {
    const u = `${this.baseUrl}/api${path}`;
    if (!query) return u;
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (Array.isArray(v)) for (const x of v) params.append(k, x);
      else if (v) params.set(k, v);
    }
    const qs = params.toString();
    return qs ? `${u}?${qs}` : u;
  }

  /**
   * Starts a GET now whose answer the same GET takes over if it is sent within PREFETCH_TTL_MS: the
   * first screen's data is then asked for at once, not after the session check. Only a success is
   * taken over; anything else (401, 5xx, no answer) and the real request is sent as usual.
   */
  prefetch(path: string, query?: Query) {
    const url = this.url(path, query);
    const res = this.fetchFn(url, { method: 'GET', headers: { Accept: 'application/json' }, credentials: 'include' }).catch(() => null);
    this.warm.set(url, { at: Date.now(), res });
  }

  private async takeWarm(url: string): Promise<Response | null> {
    const w = this.warm.get(url);
    if (!w) return null;
    this.warm.delete(url);
    if (Date.now() - w.at > PREFETCH_TTL_MS) return null;
    const res = await w.res;
    return res && res.ok ? res : null;
  }

  /** Sends a request and returns the raw response once its status says success. */
  async send(method: string, path: string, opts: { body?: unknown; query?: Query; accept?: string; signal?: AbortSignal; headers?: Record<string, string> } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...opts.headers, Accept: opts.accept ?? 'application/json' };
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    if (method === 'GET' && this.warm.size > 0) {
      const warm = await this.takeWarm(this.url(path, opts.query));
      if (warm) return warm;
    }
    let res: Response;
    try {
      res = await this.fetchFn(this.url(path, opts.query), {
        method,
        headers,
        credentials: 'include',
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        signal: opts.signal,
      });
    } catch (err) {
      if (err instanceof DOMException && err.name === 'AbortError') throw err;
      throw new ApiError('unreachable', {
        title: 'Control plane unreachable',
        detail: `No answer from ${this.baseUrl}. It may be down, or it may not allow this origin (CORS).`,
      });
    }
    if (res.ok) return res;
    throw this.fail(await errorFromResponse(res, this.baseUrl));
  }

  private fail(err: ApiError): ApiError {
    if (err.kind === 'unauthorized') this.onUnauthorized?.(err);
    return err;
  }

  async json<T>(method: string, path: string, opts: { body?: unknown; query?: Query; signal?: AbortSignal; headers?: Record<string, string> } = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    if (res.status === 204) return undefined as T;
    const ct = res.headers.get('Content-Type');
    if (!isJson(ct)) throw this.fail(wrongBaseUrl(this.baseUrl, `answered ${res.status} with ${ct || 'no content type'} where JSON was expected`));
    try {
      return (await res.json()) as T;
    } catch {
      throw wrongBaseUrl(this.baseUrl, 'answered with a body that is not JSON');
    }
  }

  async noContent(method: string, path: string, body?: unknown): Promise<void> {
    const res = await this.send(method, path, { body });
    // A 200 with an HTML page here means the request reached a web server, not the API.
    const ct = res.headers.get('Content-Type');
    if (res.status !== 204 && ct && /text\/html/i.test(ct)) throw this.fail(wrongBaseUrl(this.baseUrl, 'answered with an HTML page'));
  }

  login(email: string, password: string, factor?: SecondFactor) {
    return this.noContent('POST', '/auth/login', { email, password, ...(factor ?? {}) });
  }
  providers() {
    return this.json<AuthProviders>('GET', '/auth/providers');
  }
  /** Where the browser goes to sign in with single sign-on (a full navigation, not a fetch). */
  ssoLoginUrl(loginUrl: string) {
    return `${this.baseUrl}${loginUrl}`;
  }
  authSettings() {
    return this.json<AuthSettings>('GET', '/auth/settings');
  }
  updateAuthSettings(s: Partial<AuthSettings>) {
    return this.json<AuthSettings>('PATCH', '/auth/settings', { body: s });
  }
  resetTotp(operatorId: string) {
    return this.noContent('DELETE', `/operators/${encodeURIComponent(operatorId)}/totp`);
  }
  beginTotp() {
    return this.json<TotpEnrolment>('POST', '/auth/me/totp');
  }
  /** currentCode: a code of the factor that is on, needed to replace it. */
  confirmTotp(code: string, currentCode?: string) {
    return this.json<{ recoveryCodes: string[] }>('POST', '/auth/me/totp/confirm', { body: currentCode ? { code, currentCode } : { code } });
  }
  logout() {
    return this.noContent('POST', '/auth/logout');
  }
  me() {
    return this.json<Me>('GET', '/auth/me');
  }
  listTenants() {
    return this.json<Items<Tenant>>('GET', '/tenants');
  }
  createTenant(id: string, name: string) {
    return this.json<Tenant>('POST', '/tenants', { body: { id, name } });
  }
  listClaimCodes(tenantId: string) {
    return this.json<Items<ClaimCode>>('GET', `/tenants/${encodeURIComponent(tenantId)}/claim-codes`);
  }
  issueClaimCode(tenantId: string, req: { ttlSeconds?: number; sensorName?: string }) {
    return this.json<IssuedClaimCode>('POST', `/tenants/${encodeURIComponent(tenantId)}/claim-codes`, { body: req });
  }
  revokeClaimCode(id: string) {
    return this.noContent('DELETE', `/claim-codes/${encodeURIComponent(id)}`);
  }
  /** One page of sensors; without a limit the API's default (50). */
  listSensors(q: SensorQuery, signal?: AbortSignal) {
    return this.json<SensorPage>('GET', '/sensors', { query: sensorQuery(q), signal });
  }
  /** Asks for a page of sensors and the summary ahead of the screen that shows them. */
  prefetchSensors(q: SensorQuery) {
    this.prefetch('/sensors', sensorQuery(q));
    this.prefetch('/sensors/summary', { tenantId: q.tenantId });
  }
  sensorSummary(tenantId: string | undefined, signal?: AbortSignal) {
    return this.json<SensorSummary>('GET', '/sensors/summary', { query: { tenantId }, signal });
  }
  sensorCommands(id: string, q: { limit?: number; cursor?: string }, signal?: AbortSignal) {
    const query = { limit: q.limit === undefined ? undefined : String(q.limit), cursor: q.cursor };
    return this.json<Page<Command>>('GET', `/sensors/${encodeURIComponent(id)}/commands`, { query, signal });
  }
  /**
   * Starts or stops many sensors as one batch; the API answers 202 with the batch to follow. A
   * retry with the same idempotency key returns that batch instead of making a second one.
   */
  sendBulkCommand(req: BulkCommand, idempotencyKey?: string) {
    return this.json<BatchProgress & { batchId: string }>('POST', '/commands', { body: req, headers: idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : undefined });
  }
  /** What a batch would send now (POST /api/commands?dryRun=true): nothing is recorded. */
  previewBulkCommand(req: BulkCommand, signal?: AbortSignal) {
    return this.json<{ matched: number; total: number; skippedRevoked: number; skippedNotEnrolled: number }>('POST', '/commands', { body: req, query: { dryRun: 'true' }, signal });
  }
  batchProgress(batchId: string, signal?: AbortSignal) {
    return this.json<BatchProgress>('GET', `/commands/batches/${encodeURIComponent(batchId)}`, { signal });
  }
  getSensor(id: string, signal?: AbortSignal) {
    return this.json<Sensor>('GET', `/sensors/${encodeURIComponent(id)}`, { signal });
  }
  sendCommand(id: string, action: 'start' | 'stop') {
    return this.json<{ commandId: string }>('POST', `/sensors/${encodeURIComponent(id)}/commands`, { body: { action } });
  }
  /** Renames a sensor or changes its labels (a JSON merge patch: a null label removes it). */
  updateSensor(id: string, patch: SensorPatch) {
    return this.json<Sensor>('PATCH', `/sensors/${encodeURIComponent(id)}`, { body: patch });
  }
  /** Decommissions a sensor: revoked for good and out of the lists. */
  decommissionSensor(id: string) {
    return this.noContent('DELETE', `/sensors/${encodeURIComponent(id)}`);
  }
  /** Past command batches, newest first. */
  listBatches(q: { limit?: number; cursor?: string }, signal?: AbortSignal) {
    return this.json<Page<BatchSummary>>('GET', '/commands/batches', { query: { limit: q.limit === undefined ? undefined : String(q.limit), cursor: q.cursor }, signal });
  }
  revokeSensor(id: string) {
    return this.noContent('POST', `/sensors/${encodeURIComponent(id)}/revoke`);
  }
  analyticsOverview(q: OverviewQuery, signal?: AbortSignal) {
    const query = { tenantId: q.tenantId, from: q.from, to: q.to, sensorId: q.sensorId, limit: q.limit === undefined ? undefined : String(q.limit) };
    return this.json<Overview>('GET', '/analytics/overview', { query, signal });
  }
  listOperators() {
    return this.json<Items<Operator>>('GET', '/operators');
  }
  createOperator(req: NewOperator) {
    return this.json<Operator>('POST', '/operators', { body: req });
  }
  updateOperator(id: string, req: OperatorUpdate) {
    return this.json<Operator>('PATCH', `/operators/${encodeURIComponent(id)}`, { body: req });
  }
  /** Sets a password; one's own needs the current one (currentPassword), an admin setting another's does not. */
  resetPassword(id: string, password: string, currentPassword?: string) {
    return this.noContent('POST', `/operators/${encodeURIComponent(id)}/password`, currentPassword === undefined ? { password } : { currentPassword, password });
  }
  signOutEverywhere(id: string) {
    return this.json<{ sessions: number }>('POST', `/operators/${encodeURIComponent(id)}/sign-out`);
  }
  /** The caller's tokens; an admin may name another operator, or '' for every operator's. */
  listTokens(operatorId?: string) {
    // An empty operatorId is meaningful here ("every operator"), so it is not left out like other empty filters.
    const path = operatorId === undefined ? '/tokens' : `/tokens?operatorId=${encodeURIComponent(operatorId)}`;
    return this.json<Items<ApiToken>>('GET', path);
  }
  createToken(req: NewApiToken) {
    return this.json<CreatedApiToken>('POST', '/tokens', { body: req });
  }
  revokeToken(id: string) {
    return this.json<ApiToken>('DELETE', `/tokens/${encodeURIComponent(id)}`);
  }
  listAudit(q: AuditQuery, signal?: AbortSignal) {
    const query = { tenantId: q.tenantId, actor: q.actor, action: q.action, cursor: q.cursor, limit: q.limit === undefined ? undefined : String(q.limit) };
    return this.json<AuditPage>('GET', '/audit', { query, signal });
  }
  chatStatus() {
    return this.json<ChatStatus>('GET', '/analytics/chat/status');
  }
  /** Opens the chat stream; the caller reads the text/event-stream body. */
  async chat(req: { tenantId: string; question: string; snapshot: AnalyticsSnapshot }, signal?: AbortSignal): Promise<Response> {
    const res = await this.send('POST', '/analytics/chat', { body: req, accept: 'text/event-stream', signal });
    const ct = res.headers.get('Content-Type');
    if (!ct || !/^text\/event-stream\b/i.test(ct)) throw wrongBaseUrl(this.baseUrl, `answered ${ct || 'no content type'} where an event stream was expected`);
    return res;
  }
}

function sensorQuery(q: SensorQuery): Query {
  const label = Object.entries(q.labels ?? {}).map(([k, v]) => `${k}=${v}`);
  return { tenantId: q.tenantId, state: q.state, q: q.q, label: label.length ? label : undefined, sort: q.sort, limit: q.limit === undefined ? undefined : String(q.limit), cursor: q.cursor };
}

function wrongBaseUrl(baseUrl: string, what: string): ApiError {
  return new ApiError('misconfigured', {
    title: 'Wrong API base URL',
    detail: `${baseUrl}/api ${what}; check VITE_API_BASE_URL.`,
  });
}

/** Maps a non-2xx response to an ApiError, reading RFC 9457 problem details when present. */
export async function errorFromResponse(res: Response, baseUrl: string): Promise<ApiError> {
  const ct = res.headers.get('Content-Type');
  let problem: Record<string, unknown> | null = null;
  if (isJson(ct)) {
    try {
      const body = (await res.json()) as unknown;
      if (body && typeof body === 'object') problem = body as Record<string, unknown>;
    } catch {
      problem = null;
    }
  }
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const retryAfter = parseRetryAfter(res.headers.get('Retry-After'));
  if (res.status === 401) {
    return new ApiError('unauthorized', {
      status: 401,
      code: str(problem?.code) ?? 'unauthorized',
      title: str(problem?.title) ?? 'Not signed in',
      detail: str(problem?.detail) ?? 'Your session has expired or was ended. Sign in again.',
    });
  }
  if (res.status === 403 && str(problem?.code) === 'forbidden') {
    // The role check, not a misconfiguration (a refused origin is 403 origin_not_allowed).
    return new ApiError('forbidden', {
      status: 403,
      code: 'forbidden',
      title: 'Not allowed',
      detail: 'Your role does not allow this action here. An admin can change your role or tenants.',
    });
  }
  if (problem && (isProblem(ct) || str(problem.code) || str(problem.title))) {
    return new ApiError('problem', {
      status: res.status,
      code: str(problem.code) ?? `http_${res.status}`,
      title: str(problem.title) ?? `Request failed (${res.status})`,
      detail: str(problem.detail),
      retryAfter,
    });
  }
  if (res.status === 404 || res.status === 405 || /text\/html/i.test(ct ?? '')) {
    return wrongBaseUrl(baseUrl, `answered ${res.status} with ${ct || 'no content type'} where JSON was expected`);
  }
  return new ApiError('problem', {
    status: res.status,
    code: `http_${res.status}`,
    title: `Request failed (${res.status} ${res.statusText})`.replace(' )', ')'),
    retryAfter,
  });
}
