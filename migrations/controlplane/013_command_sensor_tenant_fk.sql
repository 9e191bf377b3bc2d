-- A command's sensor and tenant are checked as one pair: one foreign-key
-- check per recorded command instead of two (in a batch of 10,000
-- commands each check is a trigger call; the tenant's alone took about as
-- long as the sensor's), and a command can no longer name a tenant its
-- sensor is not in. The tenant still exists whenever the sensor does
-- (sensors.tenant_id references it). Commands have always been recorded
-- with their sensor's tenant, so existing rows satisfy the new constraint.
CREATE UNIQUE INDEX sensors_id_tenant_idx ON sensors (id, tenant_id);
ALTER TABLE commands
    ADD CONSTRAINT commands_sensor_tenant_fkey FOREIGN KEY (sensor_id, tenant_id) REFERENCES sensors (id, tenant_id);
ALTER TABLE commands
    DROP CONSTRAINT commands_sensor_id_fkey,
    DROP CONSTRAINT commands_tenant_id_fkey;
