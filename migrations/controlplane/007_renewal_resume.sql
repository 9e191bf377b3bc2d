-- A renewal keeps, with the certificate it issued, what it was given: the
-- CSR's digest, the certificate whose key signed its proof and the sensor
-- token it presented (a SHA-256, like every token). An agent whose answer
-- was lost sends the same request again; these let the control plane
-- recognise it (core/fleet Service.Renew). Enrolment leaves them NULL.
ALTER TABLE sensor_certificates
    ADD COLUMN csr_sha256        bytea CHECK (octet_length(csr_sha256) = 32),
    ADD COLUMN proven_serial     text CHECK (proven_serial ~ '^[0-9a-f]{1,64}$'),
    ADD COLUMN proven_token_hash bytea CHECK (octet_length(proven_token_hash) = 32),
    ADD CONSTRAINT sensor_certificates_renewal_all_or_none
        CHECK ((csr_sha256 IS NULL) = (proven_serial IS NULL) AND (proven_serial IS NULL) = (proven_token_hash IS NULL));
