-- Provisioner schema: the NATS operator record, accounts, users and
-- revocations. Plain SQL so that `psql -f migrations/001_init.sql` works as
-- well as `provisioner migrate`; every statement is IF NOT EXISTS so applying
-- it both ways is harmless. Seeds are stored sealed (AES-256-GCM, the record's
-- public key as additional data), never in clear.

-- The trust root. Exactly one row: the id column can only hold 1.
CREATE TABLE IF NOT EXISTS nats_operator (
    id              smallint    PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    pub_key         text        NOT NULL UNIQUE,
    name            text        NOT NULL,
    jwt             text        NOT NULL,
    system_account  text        NOT NULL,
    control_account text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Accounts signed by the operator. jwt_hash is the hex SHA-256 of jwt;
-- pushed_at is the last successful push of the current jwt to nats-server and
-- is reset to NULL whenever jwt changes.
CREATE TABLE IF NOT EXISTS nats_accounts (
    account_id text        PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('system', 'control', 'tenant')),
    tenant_id  text,
    name       text        NOT NULL,
    seed_enc   bytea       NOT NULL,
    jwt        text        NOT NULL,
    jwt_hash   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    pushed_at  timestamptz,
    CONSTRAINT nats_accounts_tenant_only_for_tenants CHECK ((kind = 'tenant') = (tenant_id IS NOT NULL))
);

CREATE UNIQUE INDEX IF NOT EXISTS nats_accounts_tenant_id_key
    ON nats_accounts (tenant_id) WHERE tenant_id IS NOT NULL;

-- One SYS and one CONTROL account.
CREATE UNIQUE INDEX IF NOT EXISTS nats_accounts_singleton_kind_key
    ON nats_accounts (kind) WHERE kind <> 'tenant';

CREATE INDEX IF NOT EXISTS nats_accounts_unpushed_idx
    ON nats_accounts (updated_at) WHERE pushed_at IS NULL;

-- Users minted in an account. A revoked user keeps its row (revoked_at set);
-- the partial unique indexes allow one active user per sensor and per backend
-- name, so a revoked sensor can be given a new user.
CREATE TABLE IF NOT EXISTS nats_users (
    user_pub_key text        PRIMARY KEY,
    account_id   text        NOT NULL REFERENCES nats_accounts (account_id),
    kind         text        NOT NULL CHECK (kind IN ('sensor', 'backend')),
    tenant_id    text,
    sensor_id    text,
    name         text        NOT NULL,
    seed_enc     bytea       NOT NULL,
    jwt          text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CONSTRAINT nats_users_sensor_fields CHECK ((kind = 'sensor') = (tenant_id IS NOT NULL AND sensor_id IS NOT NULL))
);

CREATE UNIQUE INDEX IF NOT EXISTS nats_users_active_sensor_key
    ON nats_users (account_id, sensor_id) WHERE kind = 'sensor' AND revoked_at IS NULL;

CREATE UNIQUE INDEX IF NOT EXISTS nats_users_active_backend_key
    ON nats_users (name) WHERE kind = 'backend' AND revoked_at IS NULL;

CREATE INDEX IF NOT EXISTS nats_users_active_sensor_lookup_idx
    ON nats_users (tenant_id, sensor_id) WHERE kind = 'sensor' AND revoked_at IS NULL;

-- Every revoked user key of an account; the account JWT carries the full list.
-- The user need not be in nats_users (a key can be revoked blind).
CREATE TABLE IF NOT EXISTS nats_revocations (
    account_id   text        NOT NULL REFERENCES nats_accounts (account_id),
    user_pub_key text        NOT NULL,
    revoked_at   timestamptz NOT NULL,
    PRIMARY KEY (account_id, user_pub_key)
);
