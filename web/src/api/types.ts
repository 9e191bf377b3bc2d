// Shapes of the control plane's JSON, as its OpenAPI description (adapters/httpapi/controlapi/openapi.yaml) states them.

export type NatsStatus = 'pending' | 'provisioned';

export interface Tenant {
  id: string;
  name: string;
  natsAccountPubKey?: string | null;
  natsStatus: NatsStatus;
}

export interface IssuedClaimCode {
  id: string;
  code: string;
  expiresAt: string;
}

export interface ClaimCode {
  id: string;
  expiresAt: string;
  sensorName?: string | null;
  createdAt?: string | null;
  usedAt?: string | null;
  revokedAt?: string | null;
  used?: boolean;
  revoked?: boolean;
}

export const SENSOR_STATES = ['online', 'running', 'stopped', 'error', 'offline', 'revoked', 'pending'] as const;
export type SensorState = (typeof SENSOR_STATES)[number];

export interface LastCommand {
  commandId: string;
  action: string;
  issuedAt: string;
  acknowledgedAt?: string | null;
}

export interface Sensor {
  id: string;
  tenantId: string;
  name: string;
  /** What the sensor reported when it redeemed its claim code. */
  hostname?: string | null;
  /** What its agent last reported in a status message. */
  agentVersion?: string | null;
  /** The address its last connection came from. */
  address?: string | null;
  state: SensorState | string;
  lastSeenAt?: string | null;
  certificate?: { serial: string; notAfter: string } | null;
  lastCommand?: LastCommand | null;
  createdAt?: string | null;
  /** Grouping labels (site, role, …); {} when none. */
  labels?: Record<string, string>;
  /** Set when the sensor was decommissioned (retired for good). */
  decommissionedAt?: string | null;
}

/** One page of GET /api/sensors; nextCursor is empty or null on the last page. */
export interface SensorPage {
  items: Sensor[];
  nextCursor?: string | null;
}

/** Which sensors: the list's filter, also what a bulk command's "all matching" sends. */
export interface SensorFilter {
  tenantId?: string;
  state?: string;
  q?: string;
  /** Every label must match (key → value). */
  labels?: Record<string, string>;
}

/** A sensor's name and labels as PATCH /api/sensors/{id} takes them: a null label removes it. */
export interface SensorPatch {
  name?: string;
  labels?: Record<string, string | null>;
}

/** One past batch of GET /api/commands/batches. */
export interface BatchSummary extends BatchProgress {
  batchId: string;
  action: string;
  createdAt: string;
  createdBy: string;
  tenantIds: string[];
}

export interface SensorQuery extends SensorFilter {
  /** name, state, lastSeen or createdAt; descending with a leading "-". */
  sort?: string;
  limit?: number;
  cursor?: string;
}

/** GET /api/sensors/summary: how many sensors the caller sees, per state. */
export interface SensorSummary {
  total: number;
  byState: Record<string, number>;
}

export type CommandAction = 'start' | 'stop';

/** POST /api/commands: either the sensors named or every sensor the filter matches. */
export interface BulkCommand {
  action: CommandAction;
  sensorIds?: string[];
  filter?: SensorFilter;
}

/** GET /api/commands/batches/{id}: where the batch's per-sensor commands stand. */
export interface BatchProgress {
  total: number;
  accepted: number;
  acknowledged: number;
  failed: number;
  pending: number;
  /** Commands no sensor took before they expired, when the API counts them apart from failed. */
  expired?: number;
  /** Sensors' reports refusing the command (among the accepted). */
  refused?: number;
  /** Sensors the request named or matched; the revoked and never-enrolled got no command. */
  matched?: number;
  skippedRevoked?: number;
  skippedNotEnrolled?: number;
  /** No command is pending any more. */
  done?: boolean;
}

/** One entry of a sensor's command history (GET /api/sensors/{id}/commands). */
export interface Command {
  commandId: string;
  action: string;
  issuedAt: string;
  issuedBy?: string;
  expiresAt?: string;
  status: string;
  acknowledgedAt?: string | null;
  failedAt?: string | null;
  /** What the sensor reported doing with it: applied, or refused with a reason. */
  outcome?: string | null;
  outcomeReason?: string | null;
  outcomeDetail?: string | null;
}

export interface Page<T> {
  items: T[];
  nextCursor?: string | null;
}

export interface ChatStatus {
  enabled: boolean;
  model?: string;
  capabilities?: { threatIntel?: boolean; historicalEnrichment?: boolean; playbooks?: boolean };
}

export interface Items<T> {
  items: T[];
}

/** Tenant and sensor ids become NATS subject tokens: the control plane accepts only this grammar. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export interface AddressCount {
  ip: string;
  count: number;
}

export interface SignatureCount {
  signatureId: number;
  signature: string;
  category: string;
  severity: number;
  count: number;
}

export interface CveCount {
  id: string;
  count: number;
  lastSeen: string;
}

/** GET /api/analytics/overview: one tenant's events in [from, to). */
export interface Overview {
  tenantId: string;
  from: string;
  to: string;
  bucketSeconds: number;
  totals: { events: number; alerts: number; sensors: number };
  series: { t: string; events: number; alerts: number }[];
  topSources: AddressCount[];
  topDestinations: AddressCount[];
  topSignatures: SignatureCount[];
  cves: CveCount[];
}

export interface OverviewQuery {
  tenantId: string;
  from: string;
  to: string;
  sensorId?: string;
  limit?: number;
}

/** What the operator is looking at, sent with each chat question (at most 16 KiB of JSON). */
export interface AnalyticsSnapshot {
  from: string;
  to: string;
  sensorId?: string;
  topSources?: AddressCount[];
  topDestinations?: AddressCount[];
  topSignatures?: SignatureCount[];
  cves?: CveCount[];
  text?: string;
}

/** Roles, from most to least powerful (core/operators/access.go). */
export const ROLES = ['admin', 'operator', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** GET /api/auth/me: who is signed in, with what role, on which tenants (every tenant for an admin). */
export interface Me {
  id: string;
  email: string;
  role: Role;
  tenants: string[];
  tokenId?: string;
  /** TOTP is enabled for the account. */
  secondFactor?: boolean;
  /** The session may only enrol a second factor (admins, where the deployment requires one). */
  secondFactorRequired?: boolean;
}

/** The sign-in methods the control plane offers (GET /api/auth/providers). */
export interface AuthProviders {
  oidc: { displayName: string; loginUrl: string } | null;
}

/** A second factor presented at sign-in. */
export interface SecondFactor {
  totp?: string;
  recoveryCode?: string;
}

export interface TotpEnrolment {
  secret: string;
  otpauthUrl: string;
}

export interface Operator {
  id: string;
  email: string;
  role: Role;
  tenants: string[];
  disabled: boolean;
  disabledAt?: string | null;
  createdAt: string;
  /** TOTP is enabled. */
  secondFactor?: boolean;
}

/** The sign-in settings (GET/PATCH /api/auth/settings, admins). */
export interface AuthSettings {
  requireAdminSecondFactor: boolean;
  ssoOnly: boolean;
  breakGlassEmail: string;
}

export interface NewOperator {
  email: string;
  password: string;
  role: Role;
  tenants: string[];
}

export interface OperatorUpdate {
  role?: Role;
  tenants?: string[];
  disabled?: boolean;
}

export interface ApiToken {
  id: string;
  operatorId: string;
  name: string;
  role: Role;
  tenants: string[];
  createdBy: string;
  createdAt: string;
  expiresAt: string;
  revokedAt?: string | null;
}

/** POST /api/tokens answers the record and, this once, the token itself. */
export interface CreatedApiToken extends ApiToken {
  token: string;
}

export interface NewApiToken {
  name: string;
  role: Role;
  tenants: string[];
  ttlSeconds?: number;
  operatorId?: string;
}

export type AuditOutcome = 'success' | 'denied' | 'failure';

export interface AuditEntry {
  id: number;
  at: string;
  actorId: string;
  actor: string;
  actorRole: string;
  tokenId: string;
  source: string;
  action: string;
  tenantId: string;
  target: string;
  outcome: AuditOutcome | string;
  status: number;
  detail: string;
}

export interface AuditPage {
  items: AuditEntry[];
  nextCursor: string;
}

export interface AuditQuery {
  tenantId?: string;
  actor?: string;
  action?: string;
  limit?: number;
  cursor?: string;
}

/** The actions the control plane records (adapters/httpapi/controlapi/api.go). */
export const AUDIT_ACTIONS = [
  'auth.login',
  'auth.logout',
  'tenant.create',
  'claim_code.issue',
  'claim_code.revoke',
  'sensor.command',
  'command.batch',
  'sensor.revoke',
  'analytics.chat',
  'operator.create',
  'operator.update',
  'operator.password',
  'operator.sign_out',
  'token.create',
  'token.revoke',
] as const;
