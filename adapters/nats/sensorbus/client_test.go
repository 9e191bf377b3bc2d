package sensorbus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

func newClient(t *testing.T, url string, creds func(context.Context) (string, error), mutate ...func(*sensorbus.Config)) *sensorbus.Client {
	t.Helper()
	cfg := sensorbus.Config{URL: url, Creds: creds, ReconnectWait: 20 * time.Millisecond, DrainTimeout: 2 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := sensorbus.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func static(creds string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return creds, nil }
}

func startReady(t *testing.T, c *sensorbus.Client) {
	t.Helper()
	c.Start(t.Context())
	waitFor(t, 10*time.Second, "client ready", c.Ready)
}

type status struct {
	Subject string
	Data    string
}

// issuedAt is when the test commands were issued.
var issuedAt = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

// command is command id for sensor s asking for action.
func command(s topology.Sensor, id string, action fleet.Action) fleet.Command {
	return fleet.Command{
		ID: id, TenantID: s.TenantID, SensorID: s.SensorID, Action: action,
		IssuedAt: issuedAt, IssuedBy: "ops@example.com", ExpiresAt: issuedAt.Add(10 * time.Minute),
	}
}

// statusJSON is a well-formed status payload whose detail is detail.
func statusJSON(detail string) string {
	return `{"state":"online","at":"2026-11-21T09:00:00Z","detail":"` + detail + `"}`
}

// recorder is a status handler that remembers what it was given.
type recorder struct {
	mu  sync.Mutex
	got []status
}

// handle records the report's detail under the status subject of the
// sensor it names, so a test compares it with the subject the sensor
// published on.
func (r *recorder) handle(_ context.Context, m fleet.StatusUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	subject := topology.Sensor{TenantID: m.Sensor.TenantID, SensorID: m.Sensor.SensorID}.StatusSubject()
	r.got = append(r.got, status{subject, m.Report.Detail})
}

func (r *recorder) all() []status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]status(nil), r.got...)
}

func (r *recorder) len() int { return len(r.all()) }

func TestCommandLandsInStreamOnceAndReachesTheSensor(t *testing.T) {
	t.Parallel()
	s1 := sensorT1("s1")
	w, url, admin := running(t, -1, s1)
	c := newClient(t, url, static(w.backendCreds()))
	startReady(t, c)
	ctx := t.Context()

	publishes := []struct {
		id     string
		action fleet.Action
	}{
		{"cmd-1", fleet.ActionStart},
		{"cmd-1", fleet.ActionStart}, // a retry of the same command
		{"cmd-2", fleet.ActionStop},
	}
	var acks []fleet.PublishAck
	for _, p := range publishes {
		ack, err := c.PublishCommand(ctx, command(s1, p.id, p.action))
		if err != nil {
			t.Fatalf("PublishCommand(%s): %v", p.id, err)
		}
		acks = append(acks, ack)
	}
	if diff := cmp.Diff([]fleet.PublishAck{{Sequence: 1}, {Sequence: 1, Duplicate: true}, {Sequence: 2}}, acks); diff != "" {
		t.Errorf("acknowledgements (-want +got):\n%s", diff)
	}

	st, err := admin.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got != 2 {
		t.Errorf("stream holds %d messages, want 2 (duplicate msg id stored once)", got)
	}
	raw, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := raw.Header.Get(jetstream.MsgIDHeader); got != "cmd-1" {
		t.Errorf("first message Nats-Msg-Id = %q, want cmd-1", got)
	}

	_, sjs := w.sensor(url, s1)
	cons, err := sjs.Consumer(ctx, stream, s1.Consumer())
	if err != nil {
		t.Fatalf("sensor looks up its consumer: %v", err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The sensor decodes what it fetched with sdk/sensorwire, as
	// sensorclient does.
	var got []sensorwire.Command
	for m := range batch.Messages() {
		c, err := sensorwire.DecodeCommand(m.Data())
		if err != nil || c.CommandID != m.Headers().Get(jetstream.MsgIDHeader) {
			t.Errorf("message %s: %+v, %v; want a command with the message id", m.Data(), c, err)
		}
		got = append(got, c)
		if err := m.DoubleAck(ctx); err != nil {
			t.Errorf("ack: %v", err)
		}
	}
	if err := batch.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	wire := func(id string, a sensorwire.Action) sensorwire.Command {
		return sensorwire.Command{
			CommandID: id, TenantID: "t1", SensorID: "s1", Action: a,
			IssuedAt: issuedAt, IssuedBy: "ops@example.com", ExpiresAt: issuedAt.Add(10 * time.Minute),
		}
	}
	want := []sensorwire.Command{wire("cmd-1", sensorwire.ActionStart), wire("cmd-2", sensorwire.ActionStop)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sensor fetched (-want +got):\n%s", diff)
	}
	if got := c.Stats().Published; got != 3 {
		t.Errorf("Stats().Published = %d, want 3", got)
	}
}

func TestStatusReachesHandler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		subscribeBefore bool
	}{
		{name: "subscribed before connecting", subscribeBefore: true},
		{name: "subscribed while connected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			url := w.start(-1)
			c := newClient(t, url, static(w.backendCreds()))
			var rec recorder
			if tt.subscribeBefore {
				c.SubscribeStatus(rec.handle)
			}
			startReady(t, c)
			if !tt.subscribeBefore {
				c.SubscribeStatus(rec.handle)
				probe(t, w, url, &rec)
			}

			s1 := sensorT1("s1")
			snc, _ := w.sensor(url, s1)
			sent := []string{
				statusJSON("first"), strings.Repeat("x", sensorbus.MaxStatusBytes+1),
				`{"state":"online","at":"2026-11-21T09:00:00Z","sensorId":"s2"}`, statusJSON("second"),
			}
			for _, d := range sent {
				if err := snc.Publish(s1.StatusSubject(), []byte(d)); err != nil {
					t.Fatal(err)
				}
			}
			if err := snc.Flush(); err != nil {
				t.Fatal(err)
			}
			fromS1 := func() []status {
				var out []status
				for _, s := range rec.all() {
					if s.Subject == s1.StatusSubject() {
						out = append(out, s)
					}
				}
				return out
			}
			waitFor(t, 5*time.Second, "two statuses handled", func() bool { return len(fromS1()) >= 2 })

			want := []status{{s1.StatusSubject(), "first"}, {s1.StatusSubject(), "second"}}
			if diff := cmp.Diff(want, fromS1()); diff != "" {
				t.Errorf("handled (-want +got):\n%s", diff)
			}
			// Every status that arrived was handled, dropped or malformed.
			waitFor(t, 5*time.Second, "counters settle", func() bool {
				st := c.Stats()
				return st.StatusReceived == uint64(rec.len())+st.StatusDropped+st.StatusMalformed
			})
			if st := c.Stats(); st.StatusDropped != 1 || st.StatusMalformed != 1 {
				t.Errorf("StatusDropped = %d, StatusMalformed = %d; want 1 and 1 (the oversized one, the unknown field)", st.StatusDropped, st.StatusMalformed)
			}
		})
	}
}

// probe publishes statuses from another sensor until the handler sees one:
// a subscription added while connected is live once a probe gets through.
func probe(t *testing.T, w *world, url string, rec *recorder) {
	t.Helper()
	nc, _ := w.sensor(url, sensorT1("probe"))
	waitFor(t, 5*time.Second, "probe status handled", func() bool {
		_ = nc.Publish("rxc.t1.probe.status", []byte(statusJSON("probe")))
		_ = nc.Flush()
		return rec.len() > 0
	})
}

func TestQueueGroupSharesStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	url := w.start(-1)

	var mu sync.Mutex
	seen := map[string]int{}
	perClient := make([]atomic.Int64, 2)
	clients := make([]*sensorbus.Client, 2)
	for i := range clients {
		c := newClient(t, url, static(w.backendCreds()))
		c.SubscribeStatus(func(_ context.Context, m fleet.StatusUpdate) {
			perClient[i].Add(1)
			mu.Lock()
			seen[m.Report.Detail]++
			mu.Unlock()
		})
		startReady(t, c)
		clients[i] = c
	}

	snc, _ := w.sensor(url, sensorT1("s1"))
	const n = 60
	for i := 0; i < n; i++ {
		if err := snc.Publish("rxc.t1.s1.status", []byte(statusJSON(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := snc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "all statuses handled", func() bool { return perClient[0].Load()+perClient[1].Load() >= n })
	// Close drains: anything already delivered to either client is handled
	// before it returns, so a duplicate cannot arrive after the count.
	for _, c := range clients {
		c.Close()
	}

	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{}
	for i := 0; i < n; i++ {
		want[fmt.Sprint(i)] = 1
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("times each status was handled (-want +got):\n%s", diff)
	}
	if perClient[0].Load() == 0 || perClient[1].Load() == 0 {
		t.Errorf("handled per client = %d, %d: want both to share the work", perClient[0].Load(), perClient[1].Load())
	}
}

func TestStartBeforeServerConnectsLater(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	port := freePort(t)
	var credsCalls atomic.Int64
	backend := w.backendCreds()
	creds := func(context.Context) (string, error) {
		// The provisioner is down for the first two attempts too.
		if credsCalls.Add(1) <= 2 {
			return "", fleet.ErrProvisionerUnavailable
		}
		return backend, nil
	}
	c := newClient(t, urlFor(port), creds)
	var rec recorder
	c.SubscribeStatus(rec.handle)

	start := time.Now()
	c.Start(t.Context())
	if took := time.Since(start); took > time.Second {
		t.Errorf("Start blocked for %v", took)
	}
	if c.Ready() {
		t.Fatal("Ready before any server exists")
	}
	waitFor(t, 5*time.Second, "credentials retried", func() bool { return credsCalls.Load() >= 3 })

	url := w.start(port)
	s1 := sensorT1("s1")
	w.admin(url, s1)
	waitFor(t, 10*time.Second, "client ready after the server started", c.Ready)

	if _, err := c.PublishCommand(t.Context(), command(s1, "cmd-1", fleet.ActionStart)); err != nil {
		t.Errorf("PublishCommand: %v", err)
	}
	snc, _ := w.sensor(url, s1)
	if err := snc.Publish(s1.StatusSubject(), []byte(statusJSON("up"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "status handled", func() bool { return rec.len() == 1 })
	if diff := cmp.Diff([]status{{s1.StatusSubject(), "up"}}, rec.all()); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
}

func TestPublishWhileDisconnectedFailsPromptly(t *testing.T) {
	t.Parallel()
	const publishTimeout = 30 * time.Second
	tests := []struct {
		name  string
		setup func(t *testing.T) *sensorbus.Client
	}{
		{
			name: "never started",
			setup: func(t *testing.T) *sensorbus.Client {
				return newClient(t, "nats://127.0.0.1:1", static("unused"))
			},
		},
		{
			name: "server went away",
			setup: func(t *testing.T) *sensorbus.Client {
				w, url, _ := running(t, -1)
				c := newClient(t, url, static(w.backendCreds()), func(cfg *sensorbus.Config) { cfg.PublishTimeout = publishTimeout })
				startReady(t, c)
				w.stop()
				waitFor(t, 5*time.Second, "client notices", func() bool { return !c.Ready() })
				return c
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.setup(t)
			done := make(chan error, 1)
			go func() {
				_, err := c.PublishCommand(context.Background(), command(sensorT1("s1"), "cmd-1", fleet.ActionStart))
				done <- err
			}()
			select {
			case err := <-done:
				// Nothing was sent: the command provably is not stored.
				if !errors.Is(err, fleet.ErrMessagingUnavailable) || !errors.Is(err, fleet.ErrNotPublished) {
					t.Errorf("err = %v, want ErrMessagingUnavailable and ErrNotPublished", err)
				}
			case <-time.After(publishTimeout / 2):
				t.Fatal("PublishCommand waited instead of failing promptly")
			}
		})
	}
}

func TestReconnectRestoresStatusSubscription(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	port := freePort(t)
	url := w.start(port)
	s1 := sensorT1("s1")
	c := newClient(t, url, static(w.backendCreds()))
	var rec recorder
	c.SubscribeStatus(rec.handle)
	startReady(t, c)

	w.stop()
	waitFor(t, 5*time.Second, "disconnect noticed", func() bool { return !c.Ready() })
	w.start(port)
	w.admin(url, s1)
	waitFor(t, 10*time.Second, "reconnected", c.Ready)

	snc, _ := w.sensor(url, s1)
	waitFor(t, 5*time.Second, "status handled after reconnect", func() bool {
		_ = snc.Publish(s1.StatusSubject(), []byte(statusJSON("back")))
		_ = snc.Flush()
		return rec.len() > 0
	})
	if _, err := c.PublishCommand(t.Context(), command(s1, "cmd-after", fleet.ActionStart)); err != nil {
		t.Errorf("PublishCommand after reconnect: %v", err)
	}
}

func TestRevokedCredentialsAreReplaced(t *testing.T) {
	t.Parallel()
	s1 := sensorT1("s1")
	w, url, _ := running(t, -1, s1)
	first, second := w.backendCreds(), w.backendCreds()
	var calls atomic.Int64
	c := newClient(t, url, func(context.Context) (string, error) {
		if calls.Add(1) == 1 {
			return first, nil
		}
		return second, nil
	})
	startReady(t, c)

	tok, err := jwt.ParseDecoratedJWT([]byte(first))
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	w.revokeControlUser(url, uc.Subject)
	waitFor(t, 10*time.Second, "reconnected with fresh credentials", func() bool { return calls.Load() >= 2 && c.Ready() })
	if _, err := c.PublishCommand(t.Context(), command(s1, "cmd-1", fleet.ActionStart)); err != nil {
		t.Errorf("PublishCommand with the new user: %v", err)
	}
}

func TestPublishRejectsBadInput(t *testing.T) {
	t.Parallel()
	c := newClient(t, "nats://127.0.0.1:1", static("unused"))
	tests := []struct{ name, tenant, sensor, id string }{
		{"status subject's tokens", "t1", "s1.status", "c1"},
		{"wildcard", "*", "*", "c1"},
		{"full wildcard", "t1", ">", "c1"},
		{"no tenant", "", "s1", "c1"},
		{"no msg id", "t1", "s1", ""},
	}
	for _, tt := range tests {
		m := fleet.Command{TenantID: tt.tenant, SensorID: tt.sensor, ID: tt.id}
		if _, err := c.PublishCommand(t.Context(), m); !errors.Is(err, fleet.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", tt.name, err)
		}
	}
}

func TestCredsNeverLogged(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	url := w.start(-1)
	creds := w.backendCreds()
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	calls := 0
	var mu sync.Mutex
	c := newClient(t, url, func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return "garbage " + creds[len(creds)/2:], nil // a damaged file
		}
		return creds, nil
	}, func(cfg *sensorbus.Config) { cfg.Logger = logger })
	startReady(t, c)
	c.Close()
	logs := buf.String()
	if !strings.Contains(logs, "nats connection failed") || !strings.Contains(logs, "creds content") {
		t.Errorf("damaged creds not reported; logs:\n%s", logs)
	}
	for _, line := range strings.Split(creds, "\n") {
		if len(line) > 20 && strings.Contains(logs, line) {
			t.Errorf("logs contain a line of the creds file")
		}
	}
	if c.Ready() {
		t.Error("Ready after Close")
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	creds := static("x")
	tests := []struct {
		name    string
		cfg     sensorbus.Config
		wantErr bool
	}{
		{name: "minimal", cfg: sensorbus.Config{URL: nats.DefaultURL, Creds: creds}},
		{name: "no URL", cfg: sensorbus.Config{Creds: creds}, wantErr: true},
		{name: "no creds", cfg: sensorbus.Config{URL: nats.DefaultURL}, wantErr: true},
		{name: "bad stream", cfg: sensorbus.Config{URL: nats.DefaultURL, Creds: creds, Stream: "a.b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := sensorbus.New(tt.cfg)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("err = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

type syncBuffer = logbuf.Buffer

// The client is the domain's command publisher port.
var _ fleet.CommandPublisher = (*sensorbus.Client)(nil)
