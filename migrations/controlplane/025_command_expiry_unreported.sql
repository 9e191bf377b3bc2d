-- A command that reached its sensor's stream (accepted) but was never
-- reported on by its expiry becomes expired, like a pending one: the
-- sweeper finds both through this index. A sensor's report arriving later
-- (an agent's result outbox delivers it once the control plane can record
-- it) still records the real outcome and makes the command accepted again.
CREATE INDEX commands_unreported_idx ON commands (expires_at)
    WHERE status IN ('pending', 'accepted') AND acknowledged_at IS NULL;
