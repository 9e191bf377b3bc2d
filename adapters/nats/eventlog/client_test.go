package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/nats/eventlog"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
)

// env is an operator-mode nats-server with one JetStream account holding
// the event stream and writer consumer as the provisioner creates them,
// and creds for the backend user with topology.BackendPermissions.
type env struct {
	url     string
	backend string // .creds of the backend user
	admin   jetstream.JetStream
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func creds(t *testing.T, acct nkeys.KeyPair, name string, perms topology.Permissions) string {
	t.Helper()
	ukp, err := nkeys.CreateUser()
	must(t, err)
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = name
	uc.Pub.Allow = perms.Publish
	uc.Sub.Allow = perms.Subscribe
	tok, err := uc.Encode(acct)
	must(t, err)
	seed, _ := ukp.Seed()
	out, err := jwt.FormatUserConfig(tok, seed)
	must(t, err)
	return string(out)
}

func newEnv(t *testing.T, maxBytes int64) *env {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	skp, _ := nkeys.CreateAccount()
	spub, _ := skp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.SystemAccount = spub
	otok, err := oc.Encode(okp)
	must(t, err)
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Name = "CONTROL"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumer: -1}
	atok, err := ac.Encode(okp)
	must(t, err)
	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	stok, err := sc.Encode(okp)
	must(t, err)
	srv := natstest.Start(t, natstest.Options{Dir: t.TempDir(), Operator: &natstest.Operator{
		JWT: otok, SystemAccount: spub, Preload: map[string]string{apub: atok, spub: stok},
	}})
	nc, err := nats.Connect(srv.URL(), nats.UserCredentialBytes([]byte(creds(t, akp, "admin", topology.ControlAdminPermissions()))))
	must(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	must(t, err)
	ctx := context.Background()
	if maxBytes == 0 {
		maxBytes = -1
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: topology.DefaultEventStream, Subjects: []string{topology.EventWildcard},
		Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew, MaxBytes: maxBytes, Duplicates: 10 * time.Minute})
	must(t, err)
	_, err = js.CreateOrUpdateConsumer(ctx, topology.DefaultEventStream, jetstream.ConsumerConfig{Durable: topology.EventWriter,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 20000})
	must(t, err)
	return &env{url: srv.URL(), backend: creds(t, akp, "backend", topology.BackendPermissions()), admin: js}
}

func (e *env) client(t *testing.T) *eventlog.Client {
	t.Helper()
	c, err := eventlog.New(eventlog.Config{URL: e.url, Creds: func(context.Context) (string, error) { return e.backend, nil },
		FetchWait: 200 * time.Millisecond})
	must(t, err)
	c.Start(context.Background())
	t.Cleanup(c.Close)
	deadline := time.Now().Add(10 * time.Second)
	for !c.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("client not connected within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var at = time.Now().UTC().Truncate(time.Microsecond)

func sample(id string) events.Event {
	return events.Event{ID: id, Time: at, Kind: "alert", SrcIP: netip.MustParseAddr("192.0.2.1"), SrcPort: 5000,
		DestIP: netip.MustParseAddr("2001:db8::2"), DestPort: 53, Protocol: "UDP",
		Alert:   &events.Alert{SignatureID: 1, Signature: "sig", Category: "cat", Severity: 3},
		RawJSON: []byte(`{"a":1}`)}
}

func appendAll(t *testing.T, c *eventlog.Client, tenant, sensor string, evs ...events.Event) (events.AppendResult, error) {
	t.Helper()
	a := c.Appender(tenant, sensor)
	for _, ev := range evs {
		if err := a.Append(ctx(t), ev); err != nil {
			break
		}
	}
	return a.Close(ctx(t))
}

func TestAppendFetchAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	var evs []events.Event
	for i := range 50 {
		evs = append(evs, sample(fmt.Sprintf("e%d", i)))
	}
	res, err := appendAll(t, c, "acme", "s1", evs...)
	if err != nil || res != (events.AppendResult{Acked: 50}) {
		t.Fatalf("append: %+v, %v", res, err)
	}
	// A resend within the duplicate window is acknowledged, not stored.
	res, err = appendAll(t, c, "acme", "s1", evs...)
	if err != nil || res != (events.AppendResult{Acked: 50, Duplicates: 50}) {
		t.Fatalf("resend: %+v, %v", res, err)
	}

	b, err := c.Fetch(ctx(t), 100)
	must(t, err)
	got := b.Events()
	if len(got) != 50 {
		t.Fatalf("fetched %d events, want 50", len(got))
	}
	first := got[0]
	if first.ReceivedAt.IsZero() || time.Since(first.ReceivedAt) > time.Minute {
		t.Errorf("received_at %s", first.ReceivedAt)
	}
	first.ReceivedAt = time.Time{}
	want := sample("e0")
	want.TenantID, want.SensorID = "acme", "s1"
	if diff := cmp.Diff(want, first, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("fetched event (-want +got):\n%s", diff)
	}
	must(t, b.Ack(ctx(t)))
	// Nothing is left to fetch once acked.
	b, err = c.Fetch(ctx(t), 100)
	must(t, err)
	if n := len(b.Events()); n != 0 {
		t.Errorf("%d events delivered again after ack", n)
	}
	// An idle batch acks without error, even with a context without a
	// deadline (the writer used to count a failure for every idle second).
	if err := b.Ack(context.Background()); err != nil {
		t.Errorf("ack of an empty batch: %v", err)
	}
}

func TestNakRedelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	if _, err := appendAll(t, c, "acme", "s1", sample("e1")); err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(ctx(t), 10)
	must(t, err)
	must(t, b.Nak(ctx(t)))
	b, err = c.Fetch(ctx(t), 10)
	must(t, err)
	if len(b.Events()) != 1 || b.Events()[0].ID != "e1" {
		t.Fatalf("after nak fetched %+v, want e1 again", b.Events())
	}
}

func TestFullStreamRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 8<<10)
	c := e.client(t)
	var evs []events.Event
	for i := range 200 {
		ev := sample(fmt.Sprintf("e%d", i))
		ev.RawJSON = []byte(`"` + strings.Repeat("x", 200) + `"`)
		evs = append(evs, ev)
	}
	res, err := appendAll(t, c, "acme", "s1", evs...)
	if !errors.Is(err, events.ErrLogFull) {
		t.Fatalf("append into a full stream: %+v, %v; want ErrLogFull", res, err)
	}
	if res.Acked == 0 || res.Failed == 0 || res.Acked+res.Failed > 200 {
		t.Errorf("result %+v", res)
	}
	// Exactly the acknowledged events are in the stream.
	s, err := e.admin.Stream(ctx(t), topology.DefaultEventStream)
	must(t, err)
	if n := s.CachedInfo().State.Msgs; n != res.Acked {
		t.Errorf("stream holds %d messages, %d were acknowledged", n, res.Acked)
	}
}

func TestUnreadableMessagesAreTerminated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	c := e.client(t)
	nc, err := nats.Connect(e.url, nats.UserCredentialBytes([]byte(e.backend)))
	must(t, err)
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_, err = js.Publish(ctx(t), topology.EventSubject("acme", "s1"), []byte("\xff\xff not protobuf"))
	must(t, err)
	if _, err := appendAll(t, c, "acme", "s1", sample("good")); err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(ctx(t), 10)
	must(t, err)
	if len(b.Events()) != 1 || b.Events()[0].ID != "good" {
		t.Fatalf("fetched %+v, want only the readable event", b.Events())
	}
	must(t, b.Ack(ctx(t)))
	cons, err := e.admin.Consumer(ctx(t), topology.DefaultEventStream, topology.EventWriter)
	must(t, err)
	if info := cons.CachedInfo(); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer still has %d pending acks, %d pending", info.NumAckPending, info.NumPending)
	}
}

func TestAppendWithoutConnection(t *testing.T) {
	t.Parallel()
	c, err := eventlog.New(eventlog.Config{URL: "nats://127.0.0.1:1", Creds: func(context.Context) (string, error) { return "", errors.New("none") }})
	must(t, err)
	res, err := appendAll(t, c, "acme", "s1", sample("e1"))
	if !errors.Is(err, events.ErrUnavailable) || res.Failed != 1 {
		t.Fatalf("append while disconnected: %+v, %v; want ErrUnavailable", res, err)
	}
	if _, err := c.Fetch(ctx(t), 10); !errors.Is(err, events.ErrUnavailable) {
		t.Fatalf("fetch while disconnected: %v; want ErrUnavailable", err)
	}
}
