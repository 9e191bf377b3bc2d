-- A second factor for local operator accounts (TOTP, RFC 6238) and the
-- deployment's sign-in settings.

-- TOTP secrets are sealed (AES-256-GCM, OPERATOR_SECRET_ENCRYPTION_KEY,
-- bound to the operator's id); never stored in clear. totp_pending is an
-- enrolment awaiting its first code; totp_last_step refuses a code of a
-- time step already used (replay).
ALTER TABLE operators
    ADD COLUMN totp_secret     bytea,
    ADD COLUMN totp_pending    bytea,
    ADD COLUMN totp_enabled_at timestamptz,
    ADD COLUMN totp_last_step  bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT operators_totp_enabled CHECK ((totp_secret IS NULL) = (totp_enabled_at IS NULL));

-- One-time recovery codes, stored as SHA-256 hashes.
CREATE TABLE operator_recovery_codes (
    operator_id text NOT NULL REFERENCES operators (id) ON DELETE CASCADE,
    code_hash   bytea NOT NULL CHECK (octet_length(code_hash) = 32),
    used_at     timestamptz,
    PRIMARY KEY (operator_id, code_hash)
);

-- Sign-in settings an admin sets: one row. sso_only refuses password
-- sign-in except for the break-glass account.
CREATE TABLE auth_settings (
    id                          boolean PRIMARY KEY DEFAULT true CHECK (id),
    require_admin_second_factor boolean NOT NULL DEFAULT false,
    sso_only                    boolean NOT NULL DEFAULT false,
    break_glass_email           text NOT NULL DEFAULT '',
    CHECK (NOT sso_only OR break_glass_email <> '')
);
