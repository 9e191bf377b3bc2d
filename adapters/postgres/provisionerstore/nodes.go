package provisionerstore

import (
	"context"
	"fmt"

	"github.com/rxc-project/rxc/adapters/postgres/pglock"
	"github.com/rxc-project/rxc/core/provisioning"
)

// SetConsumerNodes records the nodes of claimed consumer names in one
// statement; a name nobody claims is ignored, and so is an empty node.
func (s *Store) SetConsumerNodes(ctx context.Context, nodes []provisioning.ConsumerNode) error {
	if len(nodes) == 0 {
		return nil
	}
	names := make([]string, 0, len(nodes))
	where := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Node == "" {
			continue
		}
		names = append(names, n.Consumer)
		where = append(where, n.Node)
	}
	if len(names) == 0 {
		return nil
	}
	// A name given twice keeps its last node (the later answer).
	_, err := s.pool.Exec(ctx, `
		UPDATE nats_consumer_names c SET node = v.node, node_seen_at = now()
		FROM (SELECT DISTINCT ON (name) name, node
		      FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(name, node, i)
		      ORDER BY name, i DESC) v
		WHERE c.consumer = v.name AND c.node IS DISTINCT FROM v.node`, names, where)
	if err != nil {
		return fmt.Errorf("provisionerstore: record consumer nodes: %w", err)
	}
	return nil
}

// ConsumersOnNode lists the claims of the active sensors whose consumer was
// last seen on node, by name.
func (s *Store) ConsumersOnNode(ctx context.Context, node string) ([]provisioning.ConsumerClaim, error) {
	return s.consumerClaims(ctx, "consumers on node "+node, `SELECT c.consumer, c.tenant_id, c.sensor_id FROM nats_consumer_names c
		WHERE c.node = $1 AND c.retired_at IS NULL AND EXISTS (SELECT 1 FROM nats_users u WHERE u.kind = 'sensor'
			AND u.revoked_at IS NULL AND u.tenant_id = c.tenant_id AND u.sensor_id = c.sensor_id)
		ORDER BY c.consumer COLLATE "C"`, node)
}

// TryLock takes the lock called name if no other replica holds it (ok
// false, no unlock, when one does): replicas take turns at a job such as
// the node-loss pass without waiting for each other.
func (s *Store) TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error) {
	return pglock.TryLock(ctx, s.pool, name)
}
