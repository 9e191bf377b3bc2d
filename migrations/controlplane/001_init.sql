-- Control plane schema: tenants, operators and their sessions, claim codes,
-- sensors, their certificates and tokens, and commands. Secrets (claim codes,
-- tokens, session tokens) are stored only as SHA-256 hashes; passwords only
-- as argon2id PHC strings.

CREATE TABLE tenants (
    id                   text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$'),
    name                 text NOT NULL CHECK (name <> ''),
    nats_account_pub_key text NOT NULL DEFAULT '',
    nats_status          text NOT NULL DEFAULT 'pending' CHECK (nats_status IN ('pending', 'provisioned')),
    created_at           timestamptz NOT NULL,
    CHECK ((nats_status = 'provisioned') = (nats_account_pub_key <> ''))
);
CREATE INDEX tenants_pending_idx ON tenants (created_at) WHERE nats_status = 'pending';

CREATE TABLE operators (
    id            text PRIMARY KEY,
    email         text NOT NULL UNIQUE CHECK (email = lower(email) AND position('@' IN email) > 1),
    password_hash text NOT NULL CHECK (password_hash <> ''),
    created_at    timestamptz NOT NULL
);

CREATE TABLE operator_sessions (
    token_hash  bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    operator_id text NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX operator_sessions_operator_idx ON operator_sessions (operator_id);
CREATE INDEX operator_sessions_expires_idx ON operator_sessions (expires_at);

CREATE TABLE sensors (
    id                   text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$'),
    tenant_id            text NOT NULL REFERENCES tenants (id),
    name                 text NOT NULL,
    hostname             text NOT NULL DEFAULT '',
    state                text NOT NULL CHECK (state IN ('pending', 'online', 'running', 'stopped', 'error', 'offline', 'revoked')),
    last_seen_at         timestamptz,
    last_status_at       timestamptz,
    last_command_id      text,
    nats_user_pub_key    text NOT NULL DEFAULT '',
    nats_account_pub_key text NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    revoked_at           timestamptz,
    revoked_by           text,
    CHECK ((state = 'revoked') = (revoked_at IS NOT NULL))
);
CREATE INDEX sensors_tenant_state_idx ON sensors (tenant_id, state);
CREATE INDEX sensors_state_idx ON sensors (state);
CREATE INDEX sensors_live_last_seen_idx ON sensors (last_seen_at)
    WHERE state IN ('online', 'running', 'stopped', 'error');

CREATE TABLE claim_codes (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    code_hash   bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
    sensor_name text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    expires_at  timestamptz NOT NULL CHECK (expires_at > created_at),
    used_at     timestamptz,
    revoked_at  timestamptz,
    sensor_id   text REFERENCES sensors (id),
    CHECK ((used_at IS NULL) = (sensor_id IS NULL))
);
CREATE INDEX claim_codes_tenant_idx ON claim_codes (tenant_id, created_at DESC);

CREATE TABLE sensor_certificates (
    serial     text PRIMARY KEY CHECK (serial ~ '^[0-9a-f]{1,64}$'),
    sensor_id  text NOT NULL REFERENCES sensors (id),
    active     boolean NOT NULL,
    not_after  timestamptz NOT NULL,
    issued_at  timestamptz NOT NULL
);
-- A sensor has at most one active certificate: the one its last enrolment
-- or renewal issued.
CREATE UNIQUE INDEX sensor_certificates_one_active_idx ON sensor_certificates (sensor_id) WHERE active;
CREATE INDEX sensor_certificates_sensor_idx ON sensor_certificates (sensor_id);

CREATE TABLE sensor_tokens (
    token_hash bytea PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    sensor_id  text NOT NULL REFERENCES sensors (id),
    kind       text NOT NULL CHECK (kind IN ('enrollment', 'sensor')),
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    used_at    timestamptz,
    revoked_at timestamptz,
    CHECK (kind = 'sensor' OR expires_at IS NOT NULL)
);
-- One live token of each kind per sensor.
CREATE UNIQUE INDEX sensor_tokens_one_live_idx ON sensor_tokens (sensor_id, kind)
    WHERE used_at IS NULL AND revoked_at IS NULL;

CREATE TABLE commands (
    id              text PRIMARY KEY,
    tenant_id       text NOT NULL REFERENCES tenants (id),
    sensor_id       text NOT NULL REFERENCES sensors (id),
    action          text NOT NULL CHECK (action IN ('start', 'stop')),
    issued_at       timestamptz NOT NULL,
    issued_by       text NOT NULL,
    expires_at      timestamptz NOT NULL CHECK (expires_at > issued_at),
    acknowledged_at timestamptz,
    failed_at       timestamptz
);
CREATE INDEX commands_sensor_idx ON commands (sensor_id, issued_at DESC);

ALTER TABLE sensors ADD CONSTRAINT sensors_last_command_fk
    FOREIGN KEY (last_command_id) REFERENCES commands (id);
