-- Bounded revocation lists and revoked sensors' clean-up (issue 21).
--
-- expires_at: when every JWT a revocation can match has expired (the user
-- JWT lifetime and the revocation margin after it); the entry then leaves
-- the account JWT and the table. NULL keeps it until a tenant-wide "*"
-- entry covers it.
ALTER TABLE nats_revocations ADD COLUMN IF NOT EXISTS expires_at timestamptz;

CREATE INDEX IF NOT EXISTS nats_revocations_expiry_idx
    ON nats_revocations (account_id, expires_at) WHERE expires_at IS NOT NULL;

-- retired_at: a revocation (POST /revoke) left the pair without an active
-- user; its consumer and pending commands are removed, by the revocation or
-- by the repair pass after it. The claim itself stays with its pair: a name
-- never moves to another (tenant, sensor) pair. Claiming it again (the
-- same pair) clears retired_at.
ALTER TABLE nats_consumer_names ADD COLUMN IF NOT EXISTS retired_at timestamptz;

CREATE INDEX IF NOT EXISTS nats_consumer_names_retired_idx
    ON nats_consumer_names (consumer) WHERE retired_at IS NOT NULL;

-- expiring: every JWT ever signed for the user's key carries an expiry (it
-- was minted with one). A key first handed out without expiry (earlier
-- releases, SENSOR_USER_JWT_TTL=0) and signed again with one later still
-- has a JWT that never expires: its revocation never expires either.
ALTER TABLE nats_users ADD COLUMN IF NOT EXISTS expiring boolean NOT NULL DEFAULT false;
