-- Fleet scale: paged sensor listing, what the console shows of a sensor,
-- and commands to many sensors at once.

-- What the sensor last told about itself: the agent version of its last
-- status report or health check, and the address its last health check
-- came from ('' until known).
ALTER TABLE sensors
    ADD COLUMN agent_version text NOT NULL DEFAULT '' CHECK (length(agent_version) <= 64),
    ADD COLUMN address       text NOT NULL DEFAULT '' CHECK (length(address) <= 64);

-- Keyset pagination of GET /api/sensors: one index per sort, within a
-- tenant and across tenants (admins), each ending in the id that breaks
-- ties. Names, states and ids sort by their bytes (COLLATE "C"), the same
-- on every server whatever its locale. lastSeen sorts never-seen sensors
-- first (-infinity). The substring search (q) scans the tenant's rows: at
-- 10,000 sensors a tenant that is well within the page budget.
CREATE INDEX sensors_page_tenant_name_idx ON sensors (tenant_id, name COLLATE "C", id COLLATE "C");
CREATE INDEX sensors_page_name_idx ON sensors (name COLLATE "C", id COLLATE "C");
CREATE INDEX sensors_page_tenant_created_idx ON sensors (tenant_id, created_at, id COLLATE "C");
CREATE INDEX sensors_page_created_idx ON sensors (created_at, id COLLATE "C");
CREATE INDEX sensors_page_tenant_state_idx ON sensors (tenant_id, state COLLATE "C", id COLLATE "C");
CREATE INDEX sensors_page_state_idx ON sensors (state COLLATE "C", id COLLATE "C");
CREATE INDEX sensors_page_tenant_seen_idx ON sensors (tenant_id, COALESCE(last_seen_at, '-infinity'::timestamptz), id COLLATE "C");
CREATE INDEX sensors_page_seen_idx ON sensors (COALESCE(last_seen_at, '-infinity'::timestamptz), id COLLATE "C");

-- A command batch: one operator request for many sensors, audited once,
-- with one command per sensor underneath. tenant_ids are the tenants it
-- touched (who may read it); request_hash tells a repeat of the same
-- request (same Idempotency-Key) from another one.
CREATE TABLE command_batches (
    id                   text PRIMARY KEY,
    action               text NOT NULL CHECK (action IN ('start', 'stop')),
    created_at           timestamptz NOT NULL,
    created_by           text NOT NULL,
    operator_id          text NOT NULL,
    idempotency_key      text,
    request_hash         bytea NOT NULL CHECK (octet_length(request_hash) = 32),
    tenant_ids           text[] NOT NULL DEFAULT '{}',
    matched              integer NOT NULL CHECK (matched >= 0),
    total                integer NOT NULL CHECK (total >= 0),
    skipped_revoked      integer NOT NULL CHECK (skipped_revoked >= 0),
    skipped_not_enrolled integer NOT NULL CHECK (skipped_not_enrolled >= 0),
    CHECK (matched = total + skipped_revoked + skipped_not_enrolled)
);
CREATE UNIQUE INDEX command_batches_idempotency_idx ON command_batches (operator_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX command_batches_created_idx ON command_batches (created_at DESC, id DESC);

-- first_sent_at: when the command's first publication was attempted (NULL:
-- a batch's command not yet sent). The republication of unconfirmed
-- commands counts from it, so it stays inside the stream's duplicate
-- window however long a batch waited for its turn. Commands before this
-- release were sent when they were issued.
ALTER TABLE commands
    ADD COLUMN batch_id      text REFERENCES command_batches (id),
    ADD COLUMN first_sent_at timestamptz;
UPDATE commands SET first_sent_at = issued_at;
ALTER TABLE commands ADD CONSTRAINT commands_sent_unless_batched CHECK (batch_id IS NOT NULL OR first_sent_at IS NOT NULL);
CREATE INDEX commands_batch_idx ON commands (batch_id) WHERE batch_id IS NOT NULL;
-- The publisher's queue: batch commands never sent, oldest first.
CREATE INDEX commands_unsent_idx ON commands (issued_at, id) WHERE first_sent_at IS NULL AND status = 'pending';
-- The reconciliation: pending commands by their first publication.
DROP INDEX commands_pending_idx;
CREATE INDEX commands_pending_idx ON commands (first_sent_at) WHERE status = 'pending' AND first_sent_at IS NOT NULL;
-- commands_sensor_page_idx (sensor_id, issued_at DESC, id DESC) serves
-- everything this one did; one index less to write per command of a batch.
DROP INDEX commands_sensor_idx;

-- A sensor's last command is read as the one recorded last (seq, one index
-- probe per sensor), so a batch of thousands of commands need not write
-- the sensors' rows; sensors.last_command_id is still written for single
-- commands, for older releases. Existing commands are numbered so that
-- each sensor's last_command_id comes last.
ALTER TABLE commands ADD COLUMN seq bigint;
UPDATE commands c SET seq = o.n
FROM (SELECT c2.id, row_number() OVER (ORDER BY s.id IS NOT NULL, c2.issued_at, c2.id) AS n
      FROM commands c2 LEFT JOIN sensors s ON s.last_command_id = c2.id) AS o
WHERE c.id = o.id;
ALTER TABLE commands ALTER COLUMN seq SET NOT NULL;
ALTER TABLE commands ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY;
SELECT setval(pg_get_serial_sequence('commands', 'seq'), COALESCE((SELECT max(seq) FROM commands), 0) + 1, false);
CREATE INDEX commands_sensor_latest_idx ON commands (sensor_id, seq DESC);
