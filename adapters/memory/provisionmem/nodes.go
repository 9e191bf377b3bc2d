package provisionmem

import (
	"context"
	"slices"
	"strings"

	"github.com/rxc-project/rxc/core/provisioning"
)

// SetConsumerNodes records the nodes of claimed consumer names; a name
// nobody claims is ignored.
func (s *Store) SetConsumerNodes(_ context.Context, nodes []provisioning.ConsumerNode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range nodes {
		if _, ok := s.consumers[n.Consumer]; !ok || n.Node == "" {
			continue
		}
		if s.nodes == nil {
			s.nodes = map[string]string{}
		}
		s.nodes[n.Consumer] = n.Node
	}
	return nil
}

// ConsumersOnNode lists the claims of the active sensors whose consumer
// was last seen on node, by name.
func (s *Store) ConsumersOnNode(_ context.Context, node string) ([]provisioning.ConsumerClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []provisioning.ConsumerClaim
	for name, n := range s.nodes {
		c := s.consumers[name]
		if n != node || s.retired[name] {
			continue
		}
		if _, ok := s.active[[2]string{c.TenantID, c.SensorID}]; ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y provisioning.ConsumerClaim) int { return strings.Compare(x.Consumer, y.Consumer) })
	return out, nil
}
