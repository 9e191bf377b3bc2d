package serveradmin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/core/topology"
)

func TestEnsureEventStream(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	cfg := e.config(srv.URL())
	cfg.Events = serveradmin.EventStreamConfig{Name: topology.DefaultEventStream, MaxAge: 72 * time.Hour, MaxBytes: 4096}
	ops := e.client(cfg)
	if err := ops.EnsureEventStream(context.Background()); err != nil {
		t.Fatalf("EnsureEventStream: %v", err)
	}

	// Connecting ensures the stream and the writer consumer, with defaults.
	var info *jetstream.StreamInfo
	eventually(t, 5*time.Second, "event stream created on connect", func() bool {
		s, err := adm.Stream(context.Background(), topology.DefaultEventStream)
		if err != nil {
			return false
		}
		info = s.CachedInfo()
		_, err = s.Consumer(context.Background(), topology.EventWriter)
		return err == nil
	})
	type view struct {
		Subjects   []string
		Retention  jetstream.RetentionPolicy
		Storage    jetstream.StorageType
		Discard    jetstream.DiscardPolicy
		Replicas   int
		MaxAge     time.Duration
		MaxBytes   int64
		Duplicates time.Duration
	}
	c := info.Config
	want := view{[]string{topology.EventWildcard}, jetstream.LimitsPolicy, jetstream.FileStorage, jetstream.DiscardNew, 1, 72 * time.Hour, 4096, 10 * time.Minute}
	if diff := cmp.Diff(want, view{c.Subjects, c.Retention, c.Storage, c.Discard, c.Replicas, c.MaxAge, c.MaxBytes, c.Duplicates}); diff != "" {
		t.Errorf("event stream (-want +got):\n%s", diff)
	}
	cons, err := adm.Consumer(context.Background(), topology.DefaultEventStream, topology.EventWriter)
	must(t, err)
	cc := cons.CachedInfo().Config
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != 60*time.Second || cc.MaxAckPending != 20000 || cc.FilterSubject != topology.EventWildcard {
		t.Errorf("writer consumer: ack %v wait %s pending %d filter %q", cc.AckPolicy, cc.AckWait, cc.MaxAckPending, cc.FilterSubject)
	}

	// The backend user appends events; once the stream is full it is refused,
	// not silently trimmed.
	backend := e.user(e.ctlPub, e.ctlSeed, "backend", topology.BackendPermissions())
	nc, err := connect(srv.URL(), backend)
	must(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	must(t, err)
	subject := topology.EventSubject("acme", "s1")
	var refused error
	for i := 0; i < 100 && refused == nil; i++ {
		_, refused = js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Data: []byte(strings.Repeat("x", 500))})
	}
	var apiErr *jetstream.APIError
	if !errors.As(refused, &apiErr) || apiErr.ErrorCode != 10077 || !strings.Contains(apiErr.Description, "maximum bytes") {
		t.Fatalf("publish into a full stream: %v, want a maximum bytes refusal", refused)
	}
	s, err := adm.Stream(context.Background(), topology.DefaultEventStream)
	must(t, err)
	if first := s.CachedInfo().State.FirstSeq; first != 1 {
		t.Errorf("first sequence %d after filling: old events were dropped", first)
	}
}

func TestNewRefusesEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, ev := range map[string]serveradmin.EventStreamConfig{
		"name with a dot":        {Name: "RXC.EVENTS"},
		"the command stream":     {Name: stream},
		"negative max bytes":     {Name: "RXC_EVENTS", MaxBytes: -1},
		"window longer than age": {Name: "RXC_EVENTS", MaxAge: time.Minute},
		"six replicas":           {Name: "RXC_EVENTS", Replicas: 6},
	} {
		cfg := e.config("nats://127.0.0.1:4222")
		cfg.Events = ev
		if _, err := serveradmin.New(cfg); !errors.Is(err, serveradmin.ErrInvalidConfig) {
			t.Errorf("%s: New error = %v, want ErrInvalidConfig", name, err)
		}
	}
}
