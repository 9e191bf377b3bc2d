-- Exact command outcomes. status says whether a command reached the
-- command stream: pending (sent, not confirmed: reconciled later), accepted
-- (the stream acknowledged it, stream_seq), failed (provably never stored),
-- expired (never confirmed, past expires_at). outcome is what the sensor
-- reported: applied, or refused with a reason and the agent's detail. An
-- operator's Idempotency-Key makes a repeated request return its command.
ALTER TABLE commands
    ADD COLUMN status          text NOT NULL DEFAULT 'accepted' CHECK (status IN ('pending', 'accepted', 'failed', 'expired')),
    ADD COLUMN idempotency_key text,
    ADD COLUMN stream_seq      bigint,
    ADD COLUMN accepted_at     timestamptz,
    ADD COLUMN outcome         text CHECK (outcome IN ('applied', 'refused')),
    ADD COLUMN outcome_reason  text NOT NULL DEFAULT '',
    ADD COLUMN outcome_detail  text NOT NULL DEFAULT '';

-- Commands recorded before: a failure without a report stays failed; a
-- report means the command was delivered (the old release could show both).
UPDATE commands SET status = 'failed' WHERE failed_at IS NOT NULL AND acknowledged_at IS NULL;
UPDATE commands SET outcome = 'applied', failed_at = NULL WHERE acknowledged_at IS NOT NULL;
ALTER TABLE commands ALTER COLUMN status DROP DEFAULT;

ALTER TABLE commands
    ADD CONSTRAINT commands_failed_never_acknowledged CHECK (status <> 'failed' OR acknowledged_at IS NULL),
    ADD CONSTRAINT commands_failed_at CHECK ((status = 'failed') = (failed_at IS NOT NULL)),
    ADD CONSTRAINT commands_outcome_with_ack CHECK ((outcome IS NULL) = (acknowledged_at IS NULL));
CREATE UNIQUE INDEX commands_idempotency_idx ON commands (sensor_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX commands_pending_idx ON commands (issued_at) WHERE status = 'pending';
CREATE INDEX commands_sensor_page_idx ON commands (sensor_id, issued_at DESC, id DESC);
