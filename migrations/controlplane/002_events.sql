-- Sensor events, loaded by the control plane's event writer from the
-- RXC_EVENTS JetStream stream. Tenant and sensor come from the sensor's
-- client certificate. The table is partitioned by day (UTC) on event_time;
-- the writer creates each day's partition (events_YYYYMMDD) on demand with
-- events_ensure_partition, and old days can be dropped as whole partitions.
-- The unique key makes loading a redelivered event a no-op.
CREATE TABLE events (
    tenant_id    text        NOT NULL,
    sensor_id    text        NOT NULL,
    event_id     text        NOT NULL,
    event_time   timestamptz NOT NULL,
    received_at  timestamptz NOT NULL,
    kind         text        NOT NULL,
    src_ip       inet,
    src_port     int,
    dest_ip      inet,
    dest_port    int,
    protocol     text        NOT NULL DEFAULT '',
    signature_id bigint,
    signature    text        NOT NULL DEFAULT '',
    category     text        NOT NULL DEFAULT '',
    severity     int,
    cves         text[]      NOT NULL DEFAULT '{}',
    raw          jsonb,
    CONSTRAINT events_key UNIQUE (tenant_id, sensor_id, event_id, event_time)
) PARTITION BY RANGE (event_time);

-- Time-range scans per tenant, and the top-N and pivot queries of the
-- console and the analytics chat: by signature, by address, by CVE (the GIN
-- index serves cves @> ARRAY['CVE-…'], not = ANY(cves)).
CREATE INDEX events_tenant_time ON events (tenant_id, event_time);
CREATE INDEX events_tenant_signature ON events (tenant_id, signature_id, event_time) WHERE signature_id IS NOT NULL;
CREATE INDEX events_tenant_src_ip ON events (tenant_id, src_ip, event_time) WHERE src_ip IS NOT NULL;
CREATE INDEX events_tenant_dest_ip ON events (tenant_id, dest_ip, event_time) WHERE dest_ip IS NOT NULL;
CREATE INDEX events_cves ON events USING gin (cves);

-- events_ensure_partition creates the partition holding day (UTC) unless it
-- exists. Writers on several replicas may call it at once: the table lock
-- (self-conflicting, and taking it makes the catalog current) lets one
-- create it and the others find it; inserts wait for that moment only.
CREATE FUNCTION events_ensure_partition(day date) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    part text := 'events_' || to_char(day, 'YYYYMMDD');
    lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
BEGIN
    IF to_regclass(part) IS NOT NULL THEN
        RETURN;
    END IF;
    LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
    IF to_regclass(part) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)', part, lo, lo + interval '1 day');
EXCEPTION WHEN duplicate_table THEN
    NULL;
END
$$;
