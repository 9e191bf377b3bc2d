-- Labels: an operator's or agent's grouping of sensors (site, role, …), an
-- object of at most 16 string keys and values checked by the application
-- (core/fleet.ValidateLabels); here only its shape. GET /api/sensors?label=
-- and batch filters select with containment (@>), served by the GIN index.
ALTER TABLE sensors
    ADD COLUMN labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    -- Decommissioned: revoked for good and retired from the lists; the row
    -- and its history stay for the audit, and the id can never enrol again.
    ADD COLUMN decommissioned_at timestamptz,
    ADD COLUMN decommissioned_by text,
    ADD CONSTRAINT sensors_decommissioned_revoked CHECK (decommissioned_at IS NULL OR state = 'revoked');
CREATE INDEX sensors_labels_idx ON sensors USING gin (labels jsonb_path_ops);

-- A deleted tenant (it had no live sensors left) is kept for the history
-- of its decommissioned sensors, its commands and the audit, and hidden
-- everywhere else; its id is not reused.
ALTER TABLE tenants
    ADD COLUMN deleted_at timestamptz,
    ADD COLUMN deleted_by text;
