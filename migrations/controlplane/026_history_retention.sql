-- History retention (core/retention): the control plane's pass deletes,
-- in bounded steps, what is older than the operator's retention and no
-- longer live. These indexes let each step find its rows without reading
-- a table that grows with history, and let the step that finds nothing
-- (most passes) answer at once.

-- Audit entries older than AUDIT_RETENTION_DAYS, oldest first.
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- Finished commands outside any batch, by age (batch commands go with
-- their batch, found through command_batches_created_idx and
-- commands_batch_idx). Partial: a batch's commands never write it.
CREATE INDEX commands_single_issued_idx ON commands (issued_at) WHERE batch_id IS NULL;

-- A sensor's named last command (single commands write it) is never
-- deleted: the pass looks it up here, and so does the foreign-key check
-- of every deleted command, which otherwise read the whole sensors table.
CREATE INDEX sensors_last_command_idx ON sensors (last_command_id) WHERE last_command_id IS NOT NULL;

-- Tokens and claim codes by when they ended: used, revoked or expired,
-- whichever came first (LEAST ignores NULLs; a live token without expiry
-- has none and is never found).
CREATE INDEX sensor_tokens_ended_idx ON sensor_tokens (LEAST(used_at, revoked_at, expires_at));
CREATE INDEX claim_codes_ended_idx ON claim_codes (LEAST(used_at, revoked_at, expires_at));
-- Operators' API tokens by when they ended (revoked or expired).
CREATE INDEX api_tokens_ended_idx ON api_tokens (LEAST(revoked_at, expires_at));
