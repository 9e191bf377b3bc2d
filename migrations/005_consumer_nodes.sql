-- The NATS node each sensor's durable consumer lives on (issue 21: a node
-- loss repaired within seconds at thousands of sensors). With consumers of
-- one replica on an R3 command stream (COMMAND_CONSUMER_REPLICAS=1) a lost
-- node takes its consumers with it; the provisioner recreates exactly the
-- consumers recorded on that node instead of asking NATS for every
-- consumer. The node is the consumer's leader as its create or info answer
-- names it; node_seen_at is when that answer came. NULL: not known yet
-- (created by an earlier release, or the record not written yet): the
-- slower list pass covers those, and the periodic refresh fills them in.
ALTER TABLE nats_consumer_names ADD COLUMN IF NOT EXISTS node text;
ALTER TABLE nats_consumer_names ADD COLUMN IF NOT EXISTS node_seen_at timestamptz;
CREATE INDEX IF NOT EXISTS nats_consumer_names_node ON nats_consumer_names (node) WHERE node IS NOT NULL;
