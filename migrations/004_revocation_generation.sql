-- A generation of each account's revocation list (issue 21: POST /revoke
-- flat in time as history grows).
--
-- revocations_gen is set anew (a random UUID) by every statement that
-- inserts, updates or deletes revocations of the account, whoever runs it:
-- a trigger sets it, so an older release during a rolling upgrade, or an
-- operator by hand, moves it too. Random rather than counted: a database
-- restored from a backup and changed again never shows a generation a
-- running provisioner saw with other contents. A provisioner keeps the list it last read or wrote in memory
-- with the generation it was at, and reads the list again from this table
-- only when the generation it finds under the account's lock is not that
-- one (another replica revoked meanwhile).
ALTER TABLE nats_accounts ADD COLUMN IF NOT EXISTS revocations_gen text NOT NULL DEFAULT gen_random_uuid()::text;

CREATE OR REPLACE FUNCTION nats_revocations_bump_gen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE nats_accounts SET revocations_gen = gen_random_uuid()::text;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE nats_accounts SET revocations_gen = gen_random_uuid()::text
         WHERE account_id IN (SELECT account_id FROM old_rows);
    ELSE
        UPDATE nats_accounts SET revocations_gen = gen_random_uuid()::text
         WHERE account_id IN (SELECT account_id FROM new_rows);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS nats_revocations_gen_insert ON nats_revocations;
CREATE TRIGGER nats_revocations_gen_insert AFTER INSERT ON nats_revocations
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION nats_revocations_bump_gen();
DROP TRIGGER IF EXISTS nats_revocations_gen_update ON nats_revocations;
CREATE TRIGGER nats_revocations_gen_update AFTER UPDATE ON nats_revocations
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION nats_revocations_bump_gen();
DROP TRIGGER IF EXISTS nats_revocations_gen_delete ON nats_revocations;
CREATE TRIGGER nats_revocations_gen_delete AFTER DELETE ON nats_revocations
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION nats_revocations_bump_gen();
DROP TRIGGER IF EXISTS nats_revocations_gen_truncate ON nats_revocations;
CREATE TRIGGER nats_revocations_gen_truncate AFTER TRUNCATE ON nats_revocations
    FOR EACH STATEMENT EXECUTE FUNCTION nats_revocations_bump_gen();

-- An account JWT is stored as it is, not compressed: a tenant's carries up
-- to its bound (ACCOUNT_JWT_MAX_BYTES, 64 KiB by default, up to 1 MiB) of revocations,
-- base64 of user keys that do not compress, and every revocation stores a
-- new one. Measured on 2 cores, a 256 KiB JWT: 7–9 ms an UPDATE with the
-- default (PostgreSQL tries to compress it and keeps it as it is), 2.2–2.5
-- ms without trying. Applies to values written from now on.
ALTER TABLE nats_accounts ALTER COLUMN jwt SET STORAGE EXTERNAL;
