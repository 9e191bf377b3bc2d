-- Durable consumer names. A sensor's consumer is cmd-<tenantId>-<sensorId>
-- (the name the provisioner's contract fixes) and ids may contain '-', so two pairs can
-- spell one name: acme/eu-s1 and acme-eu/s1 are both cmd-acme-eu-s1. The
-- first pair to claim a name keeps it for good; any other pair is refused
-- (409 consumer_name_taken) and no consumer is ever re-pointed.
CREATE TABLE IF NOT EXISTS nats_consumer_names (
    consumer   text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    sensor_id  text        NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT nats_consumer_names_pair_key UNIQUE (tenant_id, sensor_id)
);

-- Existing sensors claim their names, the earliest user of a name winning.
-- A later pair that shared the name (the first release re-pointed the
-- consumer to it) has no claim: serve revokes its active user at start.
INSERT INTO nats_consumer_names (consumer, tenant_id, sensor_id, claimed_at)
SELECT DISTINCT ON (name) name, tenant_id, sensor_id, created_at
FROM (SELECT 'cmd-' || tenant_id || '-' || sensor_id AS name, tenant_id, sensor_id, created_at
      FROM nats_users WHERE kind = 'sensor') AS u
ORDER BY name, created_at, tenant_id, sensor_id
ON CONFLICT DO NOTHING;
