-- A renewal also keeps when its proof was signed (the agent's signedAt, to
-- the microsecond). A request sent again for a lost answer must carry a
-- proof signed later, so a copy of an answered request (a proxy's log, a
-- capture) is refused instead of answered (core/fleet Service.Renew).
-- Rows of renewals from before this column stay NULL: no bound for them.
ALTER TABLE sensor_certificates
    ADD COLUMN proven_signed_at timestamptz,
    ADD CONSTRAINT sensor_certificates_signed_at_with_renewal
        CHECK (proven_signed_at IS NULL OR proven_serial IS NOT NULL);
