package serveradmin

// Where consumers live, for the provisioner's node-loss repair: the node
// each create answer names (Placements), the stream's lost replicas
// (LostNodes), every consumer's node from the list (ConsumerNodes) and one
// consumer's (ConsumerNode).

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// placements keeps the node each consumer was last created or updated on,
// until they are handed over.
type placements struct {
	mu    sync.Mutex
	nodes map[string]string
}

func (p *placements) add(consumer, node string) {
	if node == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[string]string{}
	}
	p.nodes[consumer] = node
}

func (p *placements) take() []provisioning.ConsumerNode {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provisioning.ConsumerNode, 0, len(p.nodes))
	for c, n := range p.nodes {
		out = append(out, provisioning.ConsumerNode{Consumer: c, Node: n})
	}
	p.nodes = nil
	return out
}

// leaderOf is the node a consumer's info names as its leader: "" on a
// single server (no cluster information).
func leaderOf(ci *jetstream.ConsumerInfo) string {
	if ci == nil || ci.Cluster == nil {
		return ""
	}
	return ci.Cluster.Leader
}

// Placements hands over the nodes consumers were created or updated on
// (EnsureConsumer, RecreateConsumer) since the last call: each create
// answer names the consumer's leader, so recording them costs NATS nothing.
func (c *Client) Placements() []provisioning.ConsumerNode {
	return c.placed.take()
}

// LostNodes names the command stream's replicas that are offline or that
// its leader has not heard from for replicaSilence, or not at all since it
// was elected replicaSilence ago (lostReplicas; one stream info request). known is false when the stream cannot tell: it has no leader,
// or no answer came within deleteWait (its leader was the lost node and
// no new one is elected yet). A single server (no cluster) loses none.
func (c *Client) LostNodes(ctx context.Context) (lost []string, known bool, err error) {
	ci, err := c.streamCluster(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ci == nil {
		return nil, true, nil
	}
	if ci.Leader == "" {
		return nil, false, nil
	}
	lost = lostReplicas(ci)
	slices.Sort(lost)
	return lost, true, nil
}

// ConsumerNodes lists every consumer of the command stream with the node
// that answered for it, and (missing) the names none of whose nodes
// answered within nats-server's wait: the first page tells how many there
// are, the others are asked for 8 at a time (each page waits up to 4 s
// for its consumers' answers).
func (c *Client) ConsumerNodes(ctx context.Context) ([]provisioning.ConsumerNode, []string, error) {
	first, err := c.consumerPage(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	var (
		nodes   []provisioning.ConsumerNode
		missing []string
	)
	collect := func(p consumerListPage) {
		for _, ci := range p.Consumers {
			if ci.Cluster != nil && ci.Cluster.Leader != "" {
				nodes = append(nodes, provisioning.ConsumerNode{Consumer: ci.Name, Node: ci.Cluster.Leader})
			}
		}
		missing = append(missing, p.Missing...)
	}
	collect(first)
	size := len(first.Consumers) + len(first.Missing)
	if size > 0 && size < first.Total {
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			errs []error
		)
		sem := make(chan struct{}, 8)
		for offset := size; offset < first.Total; offset += size {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				page, err := c.consumerPage(ctx, offset)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				collect(page)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, nil, err
		}
	}
	slices.Sort(missing)
	return nodes, slices.Compact(missing), nil
}

// ConsumerNode asks the sensor's consumer where it lives, waiting up to
// answerWait: "" when it did not answer in time or does not exist (a
// consumer whose only node was lost answers nothing: nats-server has not
// marked the node offline for minutes), or on a single server.
func (c *Client) ConsumerNode(ctx context.Context, s topology.Sensor) (string, error) {
	var node string
	err := c.callWithin(ctx, adminConn, answerWait, func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		cons, err := js.Consumer(ctx, c.cfg.Stream.Name, s.Consumer())
		if err != nil {
			return err
		}
		node = leaderOf(cons.CachedInfo())
		return nil
	})
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return node, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "", nil
	case errors.As(err, &apiErr) && slices.Contains(offlineCodes, apiErr.ErrorCode):
		// nats-server answers for a node it has marked offline.
		return "", nil
	default:
		return "", err
	}
}

// offlineCodes are nats-server's error codes for a consumer or stream
// whose nodes are all offline (JSConsumerOfflineErr, JSStreamOfflineErr and
// their variants with a reason).
var offlineCodes = []jetstream.ErrorCode{10119, 10195, 10118, 10194}

// answerWait bounds ConsumerNode: a live consumer answers well within it,
// and every consumer of a lost node is asked once before it is recreated.
const answerWait = 500 * time.Millisecond

// streamCluster asks the command stream for its cluster state: one stream
// info request, answered within deleteWait (a stream whose leader was lost
// answers nothing until a new one is elected).
func (c *Client) streamCluster(ctx context.Context) (*jetstream.ClusterInfo, error) {
	var ci *jetstream.ClusterInfo
	err := c.callWithin(ctx, adminConn, deleteWait, func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		st, err := js.Stream(ctx, c.cfg.Stream.Name)
		if err != nil {
			return err
		}
		ci = st.CachedInfo().Cluster
		return nil
	})
	return ci, err
}
