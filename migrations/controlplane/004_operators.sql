-- Operators as a multi-user product: roles and tenant scope, disabling,
-- API tokens, login throttling and the audit trail.

-- Operators created before roles existed keep everything they could do.
ALTER TABLE operators
    ADD COLUMN role        text NOT NULL DEFAULT 'admin' CHECK (role IN ('admin', 'operator', 'viewer')),
    ADD COLUMN disabled_at timestamptz;
ALTER TABLE operators ALTER COLUMN role DROP DEFAULT;

-- Tenants granted to operators and viewers (admins see every tenant).
CREATE TABLE operator_tenants (
    operator_id text NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    tenant_id   text NOT NULL CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$'),
    PRIMARY KEY (operator_id, tenant_id)
);
CREATE INDEX operator_tenants_tenant_idx ON operator_tenants (tenant_id);

-- API tokens: stored as SHA-256 hashes; role and tenants within the
-- operator's.
CREATE TABLE api_tokens (
    id          text PRIMARY KEY,
    operator_id text NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    name        text NOT NULL CHECK (name <> ''),
    role        text NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),
    tenants     text[] NOT NULL DEFAULT '{}',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at),
    revoked_at  timestamptz
);
CREATE INDEX api_tokens_operator_idx ON api_tokens (operator_id, created_at DESC);

-- Failed logins per key ("account:<email>" or "address:<ip>"), shared by
-- every replica.
CREATE TABLE login_failures (
    key          text PRIMARY KEY,
    failures     integer NOT NULL CHECK (failures > 0),
    last_failure timestamptz NOT NULL,
    locked_until timestamptz NOT NULL
);

-- The audit trail: append-only.
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor_id   text NOT NULL DEFAULT '',
    actor      text NOT NULL DEFAULT '',
    actor_role text NOT NULL DEFAULT '',
    token_id   text NOT NULL DEFAULT '',
    source     text NOT NULL DEFAULT '',
    action     text NOT NULL,
    tenant_id  text NOT NULL DEFAULT '',
    target     text NOT NULL DEFAULT '',
    outcome    text NOT NULL CHECK (outcome IN ('success', 'denied', 'failure')),
    status     integer NOT NULL DEFAULT 0,
    detail     text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, id DESC);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);
