package serveradmin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// serverCaps reports whether the server applies a default consumer limit
// to streams without one (nats-server 2.15 and later).
func serverCaps(t *testing.T, js jetstream.JetStream) bool {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(js.Conn().ConnectedServerVersion(), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("server version %q: %v", js.Conn().ConnectedServerVersion(), err)
	}
	return major > 2 || major == 2 && minor >= 15
}

func streamMaxConsumers(t *testing.T, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(context.Background(), stream)
	must(t, err)
	info, err := st.Info(context.Background())
	must(t, err)
	return info.Config.MaxConsumers
}

// A consumer refused because the stream is full is its own error, not an
// outage: retrying does not help, and the caller is told so.
func TestConsumerLimitRefusalIsDistinct(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := e.start(0).URL()
	cfg := e.config(url)
	cfg.Stream.MaxConsumers = 3
	c := e.client(cfg)
	ctx := context.Background()
	for i := range 3 {
		must(t, c.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: fmt.Sprintf("s-%d", i)}))
	}
	err := c.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-3"})
	if !errors.Is(err, serveradmin.ErrConsumerLimit) || !errors.Is(err, provisioning.ErrConsumerLimit) {
		t.Fatalf("fourth consumer: error %v, want ErrConsumerLimit", err)
	}
	if errors.Is(err, serveradmin.ErrNotConnected) || errors.Is(err, provisioning.ErrNATSUnavailable) {
		t.Fatalf("fourth consumer: %v reads as an outage", err)
	}
	// A sensor that has its consumer still gets it when the stream is full.
	must(t, c.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-0"}))

	l, err := c.CheckConsumerLimit(ctx)
	must(t, err)
	if l.Configured != 3 || l.Stream != 3 || l.Effective != 3 || l.Source != "stream" || l.Consumers != 3 || l.Caps() {
		t.Fatalf("CheckConsumerLimit = %+v, want the stream's limit 3 holding 3 consumers", l)
	}
	if last, ok := c.LastConsumerLimit(); !ok || last != l {
		t.Fatalf("LastConsumerLimit = %+v %v, want %+v", last, ok, l)
	}
}

// The default configuration lifts nats-server 2.15's cap of 1,000
// consumers per stream: the 1,001st sensor gets its consumer.
func TestDefaultConsumerLimitLiftsServerCap(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	url := srv.URL()
	c := e.client(e.config(url))
	ctx := context.Background()
	const n = 1001
	var failed atomic.Int32
	var firstErr sync.Once
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s := topology.Sensor{Stream: stream, TenantID: "fleet", SensorID: fmt.Sprintf("s-%04d", i)}
				if err := c.EnsureConsumer(ctx, s); err != nil {
					failed.Add(1)
					firstErr.Do(func() { t.Errorf("consumer %d: %v", i, err) })
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d consumers failed", f, n)
	}
	if got := streamMaxConsumers(t, adm); got != serveradmin.DefaultMaxConsumers {
		t.Fatalf("stream max_consumers %d, want %d", got, serveradmin.DefaultMaxConsumers)
	}
	l, err := c.CheckConsumerLimit(ctx)
	must(t, err)
	if l.Consumers != n || l.Effective != serveradmin.DefaultMaxConsumers || l.Caps() {
		t.Fatalf("CheckConsumerLimit = %+v", l)
	}
}

// A stream made elsewhere without a consumer limit is capped by
// nats-server 2.15+: the check at connect says so loudly.
func TestConsumerLimitCheckReportsServerCap(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	url := srv.URL()
	if _, err := adm.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{topology.CommandWildcard}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	cfg := e.config(url)
	cfg.ManageStream, cfg.Logger = false, logs.Logger()
	c := e.client(cfg)
	eventually(t, 10*time.Second, "limit checked at connect", func() bool { _, ok := c.LastConsumerLimit(); return ok })
	l, _ := c.LastConsumerLimit()
	if serverCaps(t, adm) {
		if l.Effective != 1000 || l.Source != "server default" || !l.Caps() {
			t.Fatalf("limit %+v, want the server's default cap of 1000", l)
		}
		eventually(t, 5*time.Second, "error logged", func() bool {
			return strings.Contains(logs.String(), "caps the command stream below COMMAND_STREAM_MAX_CONSUMERS")
		})
	} else if l.Effective != -1 || l.Caps() {
		t.Fatalf("limit %+v, want none on nats-server %s", l, l.ServerVersion)
	}
	if l.Stream > 0 {
		t.Fatalf("a client that does not manage the stream changed its limit to %d", l.Stream)
	}
}

// EnsureStream raises the limit of an existing stream where the server can
// (2.15+); older servers keep the stream's limit and the rest is updated.
func TestEnsureStreamRaisesConsumerLimit(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	url := srv.URL()
	ctx := context.Background()
	cfg := e.config(url)
	cfg.Stream.MaxConsumers = 5
	must(t, e.client(cfg).EnsureStream(ctx))
	if got := streamMaxConsumers(t, adm); got != 5 {
		t.Fatalf("stream max_consumers %d, want 5", got)
	}

	logs := &logBuffer{}
	cfg.Stream.MaxConsumers, cfg.Stream.MaxAge, cfg.Logger = 10, 3*time.Hour, logs.Logger()
	c := e.client(cfg)
	if err := c.EnsureStream(ctx); err != nil {
		t.Fatalf("EnsureStream with a higher consumer limit: %v", err)
	}
	want := 10
	if !serverCaps(t, adm) {
		want = 5
		if !strings.Contains(logs.String(), "cannot change the consumer limit of an existing stream") {
			t.Errorf("no warning that the limit stays:\n%s", logs.String())
		}
	}
	if got := streamMaxConsumers(t, adm); got != want {
		t.Fatalf("stream max_consumers %d, want %d", got, want)
	}
	got, err := streamOf(t, adm)
	must(t, err)
	if got.MaxAge != 3*time.Hour {
		t.Fatalf("max age %s: the rest of the configuration was not applied", got.MaxAge)
	}
}

// A work-queue or interest stream with more consumers than the warning
// threshold is reported when the provisioner connects (its start-up):
// every ack scans all consumers, and the message names the cure. At the
// threshold, with limits retention or with the warning off nothing is said.
func TestCrowdedStreamWarningAtConnect(t *testing.T) {
	t.Parallel()
	const warning = "large fleets should use COMMAND_STREAM_RETENTION=limits"
	cases := []struct {
		name      string
		retention string
		threshold int
		consumers int
		want      bool
	}{
		{"workqueue above", serveradmin.RetentionWorkQueue, 3, 4, true},
		{"workqueue at", serveradmin.RetentionWorkQueue, 3, 3, false},
		{"workqueue below", serveradmin.RetentionWorkQueue, 5, 2, false},
		{"interest above", serveradmin.RetentionInterest, 3, 4, true},
		{"limits above", serveradmin.RetentionLimits, 3, 4, false},
		{"off", serveradmin.RetentionWorkQueue, 0, 4, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			url := e.start(0).URL()
			cfg := e.config(url)
			cfg.Stream.Retention = tc.retention
			setup := e.client(cfg)
			ctx := context.Background()
			for i := range tc.consumers {
				must(t, setup.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: fmt.Sprintf("s-%d", i)}))
			}
			setup.Close()

			logs := &logBuffer{}
			cfg.Stream.WorkQueueWarnConsumers, cfg.Logger = tc.threshold, logs.Logger()
			c := e.client(cfg)
			eventually(t, 20*time.Second, "limit checked at connect", func() bool { _, ok := c.LastConsumerLimit(); return ok })
			l, _ := c.LastConsumerLimit()
			if l.Retention != tc.retention || l.Consumers != tc.consumers {
				t.Fatalf("check found %s retention and %d consumers, want %s and %d", l.Retention, l.Consumers, tc.retention, tc.consumers)
			}
			if l.Crowded() != tc.want {
				t.Fatalf("Crowded() = %v, want %v (%+v)", l.Crowded(), tc.want, l)
			}
			// The warning is logged before the check's result is published.
			if got := strings.Contains(logs.String(), warning); got != tc.want {
				t.Fatalf("warning logged %v, want %v:\n%s", got, tc.want, logs.String())
			}
			if tc.want && strings.Count(logs.String(), warning) != 1 {
				t.Fatalf("warning logged %d times, want once:\n%s", strings.Count(logs.String(), warning), logs.String())
			}
			// A later check of a stream still crowded does not repeat it.
			_, err := c.CheckConsumerLimit(ctx)
			must(t, err)
			if n := strings.Count(logs.String(), warning); tc.want && n != 1 {
				t.Fatalf("a second check logged the warning again (%d times)", n)
			}
		})
	}
}

// A stream that grows past the threshold while the provisioner runs is
// reported by the next periodic check, once.
func TestCrowdedStreamWarningWhenItGrows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	url := e.start(0).URL()
	logs := &logBuffer{}
	cfg := e.config(url)
	cfg.Stream.WorkQueueWarnConsumers, cfg.Logger = 2, logs.Logger()
	c := e.client(cfg)
	ctx := context.Background()
	eventually(t, 20*time.Second, "limit checked at connect", func() bool { _, ok := c.LastConsumerLimit(); return ok })
	const warning = "large fleets should use COMMAND_STREAM_RETENTION=limits"
	for i := range 3 {
		must(t, c.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: fmt.Sprintf("s-%d", i)}))
		l, err := c.CheckConsumerLimit(ctx)
		must(t, err)
		if got, want := strings.Count(logs.String(), warning), max(0, min(1, i-1)); got != want || l.Crowded() != (i == 2) {
			t.Fatalf("after %d consumers: warning logged %d times (want %d), crowded %v", i+1, got, want, l.Crowded())
		}
	}
	must(t, c.EnsureConsumer(ctx, topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-3"}))
	_, err := c.CheckConsumerLimit(ctx)
	must(t, err)
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Fatalf("warning logged %d times while the stream stayed crowded, want once", n)
	}
}
