package serveradmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// claimUpdateReply is nats-server's answer to a claim update.
type claimUpdateReply struct {
	Data *struct {
		Account string `json:"account"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
	Error *struct {
		Account     string `json:"account"`
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// PushAccount sends the account JWT to the nats-servers as the SYS user and
// checks the reply. A server that has not loaded the account answers that it
// skipped the update, which is a success: it will fetch the current JWT from
// the resolver when it needs the account. While the SYS connection is down it
// fails at once with ErrNotConnected.
func (c *Client) PushAccount(ctx context.Context, pubKey, accountJWT string) error {
	if !nkeys.IsValidPublicAccountKey(pubKey) {
		return fmt.Errorf("serveradmin: push %q: %w", pubKey, provisioning.ErrInvalidPublicKey)
	}
	var msg *nats.Msg
	err := c.call(ctx, sysConn, func(ctx context.Context, nc *nats.Conn) error {
		var err error
		msg, err = nc.RequestWithContext(ctx, "$SYS.REQ.ACCOUNT."+pubKey+".CLAIMS.UPDATE", []byte(accountJWT))
		return err
	})
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("serveradmin: push %s: no server answers claim updates (is this the system account?): %w", pubKey, err)
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		// Not an outage: the same JWT is refused again however often it
		// is sent.
		return fmt.Errorf("serveradmin: push %s (%d bytes): %w: %w", pubKey, len(accountJWT), provisioning.ErrUndeliverable, err)
	}
	if err != nil {
		return fmt.Errorf("serveradmin: push %s: %w", pubKey, err)
	}
	var reply claimUpdateReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("serveradmin: push %s: %w: unreadable reply: %v", pubKey, ErrClaimUpdate, err)
	}
	switch {
	case reply.Error != nil:
		return fmt.Errorf("serveradmin: push %s: %w: %s (code %d)", pubKey, ErrClaimUpdate, reply.Error.Description, reply.Error.Code)
	case reply.Data == nil:
		return fmt.Errorf("serveradmin: push %s: %w: reply has neither data nor error", pubKey, ErrClaimUpdate)
	case reply.Data.Account != pubKey:
		return fmt.Errorf("serveradmin: push %s: %w: reply is about account %q", pubKey, ErrClaimUpdate, reply.Data.Account)
	}
	c.log.Info("pushed account JWT", "account", pubKey, "result", reply.Data.Message)
	return nil
}

// jetStream runs fn with a JetStream context of the CONTROL admin connection.
func (c *Client) jetStream(ctx context.Context, fn func(ctx context.Context, js jetstream.JetStream) error) error {
	return c.call(ctx, adminConn, func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		return fn(ctx, js)
	})
}

// EnsureStream creates the command stream or brings it to the configured
// settings: work-queue (or interest, or limits) retention, file storage, subjects
// topology.CommandWildcard, and the configured replicas, max age and
// duplicate window. Changes NATS refuses (retention or storage of an existing
// stream) are returned as errors; the stream is then left as it is.
func (c *Client) EnsureStream(ctx context.Context) error {
	s := c.cfg.Stream
	cfg := fileStream(s.Name, "RXC sensor commands", topology.CommandWildcard, s.Replicas, s.MaxAge, s.Duplicates)
	cfg.Retention = jetstream.WorkQueuePolicy
	// Without a limit of its own nats-server 2.15+ caps the stream at
	// 1,000 consumers, that is sensors.
	cfg.MaxConsumers = s.MaxConsumers
	switch s.Retention {
	case RetentionLimits:
		cfg.Retention, cfg.MaxMsgsPerSubject = jetstream.LimitsPolicy, s.MaxMsgsPerSubject
	case RetentionInterest:
		cfg.Retention = jetstream.InterestPolicy
	}
	// A work-queue or interest stream of an earlier release is carried
	// over to limits retention first (upgrade.go).
	if _, err := c.upgradeStream(ctx, cfg); err != nil {
		return err
	}
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.CreateOrUpdateStream(ctx, cfg)
		if !isMaxConsumersChangeRefused(err) {
			return err
		}
		// Servers before 2.15 cannot change max_consumers of an existing
		// stream: keep its limit, bring the rest up to date.
		st, ierr := js.Stream(ctx, s.Name)
		if ierr != nil {
			return err
		}
		info, ierr := st.Info(ctx)
		if ierr != nil {
			return err
		}
		c.log.Warn("this nats-server cannot change the consumer limit of an existing stream: it keeps its own (nats-server 2.15 and later change it in place; or recreate the stream)",
			"stream", s.Name, "stream_limit", info.Config.MaxConsumers, "configured", s.MaxConsumers, "server_version", nc(js))
		cfg.MaxConsumers = info.Config.MaxConsumers
		_, err = js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("serveradmin: stream %s: %w", s.Name, err)
	}
	return nil
}

// fileStream is what the command and the event stream have in common: file
// storage, the subjects of one wildcard, and the configured replicas, max
// age and duplicate window.
func fileStream(name, description, wildcard string, replicas int, maxAge, duplicates time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        name,
		Description: description,
		Subjects:    []string{wildcard},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      maxAge,
		Duplicates:  duplicates,
	}
}

// nc is the version of the server js talks to.
func nc(js jetstream.JetStream) string {
	if conn := js.Conn(); conn != nil {
		return conn.ConnectedServerVersion()
	}
	return ""
}

// EnsureEventStream creates the alert event stream and its durable writer
// consumer, or brings them to the configured settings: limits retention,
// file storage, subjects topology.EventWildcard, discard new (a full stream
// refuses events, the sensors retry), explicit acks for the writer. Without
// a configured event stream it does nothing.
func (c *Client) EnsureEventStream(ctx context.Context) error {
	e := c.cfg.Events
	if e.Name == "" {
		return nil
	}
	maxBytes := e.MaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	scfg := fileStream(e.Name, "RXC sensor events", topology.EventWildcard, e.Replicas, e.MaxAge, e.Duplicates)
	scfg.Retention, scfg.Discard, scfg.MaxBytes = jetstream.LimitsPolicy, jetstream.DiscardNew, maxBytes
	ccfg := jetstream.ConsumerConfig{
		Durable:       topology.EventWriter,
		Description:   "loads events into PostgreSQL; shared by the control plane's replicas",
		FilterSubject: topology.EventWildcard,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       e.WriterAckWait,
		MaxDeliver:    -1,
		MaxAckPending: e.WriterMaxAckPending,
	}
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		if _, err := js.CreateOrUpdateStream(ctx, scfg); err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, e.Name, ccfg); err != nil {
			return fmt.Errorf("consumer %s: %w", topology.EventWriter, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("serveradmin: event stream %s: %w", e.Name, err)
	}
	return nil
}

// EnsureConsumer creates or updates the sensor's durable pull consumer on the
// command stream: filtered to the sensor's command subject, explicit acks,
// bounded deliveries and pending acks. Identical concurrent calls all
// succeed and leave one consumer. A missing stream is created first when
// the client manages the stream.
func (c *Client) EnsureConsumer(ctx context.Context, s topology.Sensor) error {
	_, err := c.ensureConsumer(ctx, s)
	return err
}

// ensureConsumer is EnsureConsumer naming the node (the consumer's leader)
// the answer named: "" when it named none (a single server).
func (c *Client) ensureConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	if err := ids.ValidateSensor(s.TenantID, s.SensorID); err != nil {
		return "", fmt.Errorf("serveradmin: consumer: %w", err)
	}
	if s.Stream != c.cfg.Stream.Name {
		return "", fmt.Errorf("serveradmin: consumer %s: %w: %q, managing %q", s.Consumer(), ErrStreamMismatch, s.Stream, c.cfg.Stream.Name)
	}
	node, err := c.createConsumer(ctx, s)
	if errors.Is(err, jetstream.ErrStreamNotFound) && c.cfg.ManageStream {
		if err := c.EnsureStream(ctx); err != nil {
			return "", err
		}
		node, err = c.createConsumer(ctx, s)
	}
	return node, err
}

// createConsumer creates the consumer, or brings an existing one with the
// same filter subject to the configured settings. An existing consumer of
// that name that filters another subject belongs to another (tenant,
// sensor) pair: it is never re-pointed, the call fails with
// provisioning.ErrConsumerNameTaken. It names the node the answer named
// as the consumer's leader, and keeps it for Placements.
func (c *Client) createConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	want := consumerConfig(c.cfg, s)
	var node string
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		// "create" succeeds for a new consumer and for an identical one:
		// the common cases cost one round trip.
		cons, err := js.CreateConsumer(ctx, s.Stream, want)
		if err == nil {
			node = leaderOf(cons.CachedInfo())
			return nil
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return err
		}
		cons, err = js.Consumer(ctx, s.Stream, want.Durable)
		if err != nil {
			return err
		}
		if got := cons.CachedInfo().Config; got.FilterSubject != want.FilterSubject || len(got.FilterSubjects) > 0 {
			return fmt.Errorf("%w: it filters %q, not %q", provisioning.ErrConsumerNameTaken, filterOf(got), want.FilterSubject)
		}
		cons, err = js.UpdateConsumer(ctx, s.Stream, want)
		if err == nil {
			node = leaderOf(cons.CachedInfo())
		}
		return err
	})
	if isConsumerLimit(err) {
		return "", fmt.Errorf("serveradmin: consumer %s: %w (%w)", s.Consumer(), ErrConsumerLimit, err)
	}
	if err != nil {
		return "", fmt.Errorf("serveradmin: consumer %s: %w", s.Consumer(), err)
	}
	c.placed.add(want.Durable, node)
	return node, nil
}

func filterOf(c jetstream.ConsumerConfig) string {
	if len(c.FilterSubjects) > 0 {
		return strings.Join(c.FilterSubjects, ",")
	}
	return c.FilterSubject
}

func consumerConfig(cfg Config, s topology.Sensor) jetstream.ConsumerConfig {
	replicas := 0 // the stream's, as consumers of earlier releases
	if cfg.Stream.ConsumerReplicas != cfg.Stream.Replicas {
		replicas = cfg.Stream.ConsumerReplicas
	}
	return jetstream.ConsumerConfig{
		Durable:       s.Consumer(),
		Description:   "commands of sensor " + s.SensorID + " of tenant " + s.TenantID,
		FilterSubject: s.CommandSubject(),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.ConsumerAckWait,
		MaxDeliver:    cfg.ConsumerMaxDeliver,
		MaxAckPending: cfg.ConsumerMaxAckPending,
		Replicas:      replicas,
	}
}

// RemoveConsumer removes what a revoked sensor leaves in the command
// stream: its pending commands (the stream purged by its command subject)
// first, then its durable consumer, so a crash in between leaves a
// consumer that the repair pass finds. It removes only a consumer that
// filters the sensor's own subject (a name is never another pair's, but a
// consumer re-pointed by hand is left alone); what is already gone is
// success.
func (c *Client) RemoveConsumer(ctx context.Context, s topology.Sensor) error {
	if s.Stream != c.cfg.Stream.Name {
		return fmt.Errorf("serveradmin: consumer %s: %w: %q, managing %q", s.Consumer(), ErrStreamMismatch, s.Stream, c.cfg.Stream.Name)
	}
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		st, err := js.Stream(ctx, s.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		cons, err := st.Consumer(ctx, s.Consumer())
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			cons = nil
		case err != nil:
			return err
		case filterOf(cons.CachedInfo().Config) != s.CommandSubject():
			return fmt.Errorf("%w: it filters %q, not %q", provisioning.ErrConsumerNameTaken, filterOf(cons.CachedInfo().Config), s.CommandSubject())
		}
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(s.CommandSubject())); err != nil {
			return fmt.Errorf("purge %s: %w", s.CommandSubject(), err)
		}
		if cons == nil {
			return nil
		}
		if err := st.DeleteConsumer(ctx, s.Consumer()); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("serveradmin: remove consumer %s: %w", s.Consumer(), err)
	}
	c.log.Info("removed a revoked sensor's consumer and pending commands", "consumer", s.Consumer())
	return nil
}

// ConsumerNames lists the names of the command stream's consumers.
func (c *Client) ConsumerNames(ctx context.Context) ([]string, error) {
	var names []string
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		st, err := js.Stream(ctx, c.cfg.Stream.Name)
		if err != nil {
			return err
		}
		lister := st.ConsumerNames(ctx)
		for n := range lister.Name() {
			names = append(names, n)
		}
		return lister.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("serveradmin: consumers of %s: %w", c.cfg.Stream.Name, err)
	}
	return names, nil
}

// OfflineConsumers names the command stream's consumers that no live node
// holds: nats-server lists a consumer under "missing" when none of its
// peers answered (all of them are offline, or none answered within its
// 4 s). With consumers of fewer replicas than the stream (ConsumerReplicas)
// these are the consumers whose only node was lost. It asks the stream
// first and lists the consumers only while a replica of the stream is
// offline or behind, or when full is set: the stream is on every node of a
// cluster as large as its replicas, so a lost node shows there at the cost
// of one request.
func (c *Client) OfflineConsumers(ctx context.Context, full bool) ([]string, error) {
	if !full {
		ci, err := c.streamCluster(ctx)
		whole := err == nil && !degraded(ci)
		// A stream that does not answer within deleteWait (no leader yet
		// after a loss) is looked at through the list, which the meta
		// leader answers.
		if err == nil && whole {
			return nil, nil
		}
	}
	_, missing, err := c.ConsumerNodes(ctx)
	return missing, err
}

// consumerPage asks for one page of the command stream's consumer list.
func (c *Client) consumerPage(ctx context.Context, offset int) (consumerListPage, error) {
	var page consumerListPage
	// nats-server waits up to 4 s for the consumers of a page to answer
	// before naming the others missing.
	err := c.callWithin(ctx, adminConn, c.cfg.RequestTimeout+5*time.Second, func(ctx context.Context, nc *nats.Conn) error {
		req, err := json.Marshal(struct {
			Offset int `json:"offset"`
		}{offset})
		if err != nil {
			return err
		}
		msg, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.LIST."+c.cfg.Stream.Name, req)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(msg.Data, &page); err != nil {
			return fmt.Errorf("unreadable consumer list: %w", err)
		}
		if page.Error != nil {
			return fmt.Errorf("consumer list: %s (code %d)", page.Error.Description, page.Error.Code)
		}
		return nil
	})
	if err != nil {
		return page, fmt.Errorf("serveradmin: offline consumers of %s: %w", c.cfg.Stream.Name, err)
	}
	return page, nil
}

// consumerListPage is nats-server's answer to $JS.API.CONSUMER.LIST.
type consumerListPage struct {
	Total     int `json:"total"`
	Consumers []struct {
		Name    string `json:"name"`
		Cluster *struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
	} `json:"consumers"`
	Missing []string `json:"missing"`
	Error   *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// degraded reports whether a clustered stream has no leader or a replica
// that is offline or that its leader has not heard from for replicaSilence.
// A replica that is only behind (not current) is not: under a heavy load,
// an enrolment for one, followers lag without being lost, and listing every
// consumer then would only add to the load.
func degraded(ci *jetstream.ClusterInfo) bool {
	if ci == nil {
		return false
	}
	return ci.Leader == "" || len(lostReplicas(ci)) > 0
}

// lostReplicas names the replicas of a clustered stream with a leader that
// are offline, that the leader has not heard from for replicaSilence, or
// that it has not heard from at all since it was elected replicaSilence
// ago: nats-server (2.15) forgets when it last heard from the other nodes
// when a leader is lost, so the lost leader shows to the new one as never
// heard from (Active 0, not current) rather than silent, until it marks the
// node offline minutes later.
func lostReplicas(ci *jetstream.ClusterInfo) []string {
	var lost []string
	settled := ci.LeaderSince != nil && time.Since(*ci.LeaderSince) > replicaSilence
	for _, r := range ci.Replicas {
		if r.Offline || r.Active > replicaSilence || (settled && r.Active == 0 && !r.Current) {
			lost = append(lost, r.Name)
		}
	}
	return lost
}

// replicaSilence is how long a stream replica may go unheard before the
// consumers are listed (a live one is heard from about every second;
// nats-server marks a killed node offline only after minutes).
const replicaSilence = 5 * time.Second

// RecreateConsumer deletes the sensor's consumer and creates it again with
// the configured settings, for a consumer no live node holds
// (OfflineConsumers): nats-server's meta leader removes the assignment
// without the lost node and places the new consumer on a live, caught-up
// one. The new consumer starts from the first command the stream keeps for
// the sensor, so commands the lost consumer had delivered are delivered
// again: no command is lost, and agents recognise the ones they applied
// (the agent's applied-commands file). A node that returns later drops the
// old consumer.
//
// Until nats-server marks a killed node offline (its peers wait for its
// heartbeats for minutes) the meta leader applies the delete without
// answering it, so a delete that gets no answer within deleteWait is taken
// as done and the create tells: it fails while the old assignment stands.
func (c *Client) RecreateConsumer(ctx context.Context, s topology.Sensor) (string, error) {
	if s.Stream != c.cfg.Stream.Name {
		return "", fmt.Errorf("serveradmin: consumer %s: %w: %q, managing %q", s.Consumer(), ErrStreamMismatch, s.Stream, c.cfg.Stream.Name)
	}
	// nats-server before 2.15 may place the new consumer on the lost node
	// again while it is not marked offline (it picks among the stream's
	// peers at random): that create gets no answer, and the next attempt
	// deletes and places it again.
	var (
		node string
		err  error
	)
	for attempt := range recreateAttempts {
		if attempt > 0 && ctx.Err() != nil {
			break
		}
		if node, err = c.recreateOnce(ctx, s); err == nil {
			c.log.Info("recreated a consumer no live node held", "consumer", s.Consumer(), "node", node, "attempt", attempt+1)
			return node, nil
		}
	}
	return "", err
}

// recreateAttempts bounds RecreateConsumer's delete-and-create rounds.
const recreateAttempts = 4

func (c *Client) recreateOnce(ctx context.Context, s topology.Sensor) (string, error) {
	err := c.callWithin(ctx, adminConn, deleteWait, func(ctx context.Context, nc *nats.Conn) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		err = js.DeleteConsumer(ctx, s.Stream, s.Consumer())
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("serveradmin: recreate consumer %s: delete: %w", s.Consumer(), err)
	}
	cctx, cancel := context.WithTimeout(ctx, createWait)
	defer cancel()
	return c.ensureConsumer(cctx, s)
}

// createWait bounds the create of a recreated consumer: a live node answers
// within it; a create placed on the lost node never does.
const createWait = 3 * time.Second

// deleteWait bounds the delete of a consumer no live node holds.
const deleteWait = 2 * time.Second
