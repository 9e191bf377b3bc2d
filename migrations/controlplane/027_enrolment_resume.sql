-- An enrolment whose agent sent a proof of possession keeps, with the
-- certificate it issued, what it was given: the CSR's digest (csr_sha256),
-- the proof's signedAt (proven_signed_at) and the enrolment token it
-- consumed (enrolment_token_hash, a SHA-256 like every token). An agent
-- whose enrolment answer was lost sends the same request again with a proof
-- signed later; these let the control plane recognise it and answer again
-- (core/fleet Enrolment.EnrollProven). Renewal rows keep proven_serial and
-- proven_token_hash instead; rows of old agents' enrolments keep nothing.
ALTER TABLE sensor_certificates
    ADD COLUMN enrolment_token_hash bytea CHECK (octet_length(enrolment_token_hash) = 32),
    DROP CONSTRAINT sensor_certificates_renewal_all_or_none,
    DROP CONSTRAINT sensor_certificates_signed_at_with_renewal,
    ADD CONSTRAINT sensor_certificates_resume_kind CHECK (
        (proven_serial IS NOT NULL AND csr_sha256 IS NOT NULL AND proven_token_hash IS NOT NULL
            AND enrolment_token_hash IS NULL)
        OR (enrolment_token_hash IS NOT NULL AND csr_sha256 IS NOT NULL AND proven_signed_at IS NOT NULL
            AND proven_serial IS NULL AND proven_token_hash IS NULL)
        OR (csr_sha256 IS NULL AND proven_serial IS NULL AND proven_token_hash IS NULL
            AND proven_signed_at IS NULL AND enrolment_token_hash IS NULL));
