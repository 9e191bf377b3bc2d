package serveradmin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/nats/serveradmin"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		modify func(*serveradmin.Config)
	}{
		{"no URL", func(c *serveradmin.Config) { c.URL = "" }},
		{"malformed URL", func(c *serveradmin.Config) { c.URL = "nats://127.0.0.1:4222, nats://[::1" }},
		{"URL without host", func(c *serveradmin.Config) { c.URL = "nats://" }},
		{"no system user", func(c *serveradmin.Config) { c.SystemUser = nil }},
		{"no admin user", func(c *serveradmin.Config) { c.AdminUser = nil }},
		{"stream name with a dot", func(c *serveradmin.Config) { c.Stream.Name = "RXC.CMD" }},
		{"six replicas", func(c *serveradmin.Config) { c.Stream.Replicas = 6 }},
		{"negative max age", func(c *serveradmin.Config) { c.Stream.MaxAge = -time.Second }},
		{"duplicate window longer than max age", func(c *serveradmin.Config) { c.Stream.Duplicates = 2 * time.Hour }},
		{"negative ack wait", func(c *serveradmin.Config) { c.ConsumerAckWait = -1 }},
		{"negative request timeout", func(c *serveradmin.Config) { c.RequestTimeout = -1 }},
		{"unknown retention", func(c *serveradmin.Config) { c.Stream.Retention = "fifo" }},
		{"negative crowded-stream threshold", func(c *serveradmin.Config) { c.Stream.WorkQueueWarnConsumers = -1 }},
		{"negative per-sensor cap", func(c *serveradmin.Config) { c.Stream.MaxMsgsPerSubject = -1 }},
		{"unlimited consumers (2.15 reads -1 as its default of 1,000)", func(c *serveradmin.Config) { c.Stream.MaxConsumers = -1 }},
		{"consumer replicas above the stream's", func(c *serveradmin.Config) { c.Stream.Replicas, c.Stream.ConsumerReplicas = 1, 3 }},
		{"negative consumer replicas", func(c *serveradmin.Config) { c.Stream.ConsumerReplicas = -1 }},
		{"R1 consumers on a work-queue R3 stream (nats-server refuses them)", func(c *serveradmin.Config) {
			c.Stream.Replicas, c.Stream.ConsumerReplicas, c.Stream.Retention = 3, 1, serveradmin.RetentionWorkQueue
		}},
		{"R1 consumers on an interest R3 stream", func(c *serveradmin.Config) {
			c.Stream.Replicas, c.Stream.ConsumerReplicas, c.Stream.Retention = 3, 1, serveradmin.RetentionInterest
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config("nats://127.0.0.1:4222")
			tc.modify(&cfg)
			if _, err := serveradmin.New(cfg); !errors.Is(err, serveradmin.ErrInvalidConfig) {
				t.Fatalf("New error = %v, want %v", err, serveradmin.ErrInvalidConfig)
			}
		})
	}
}

// Positive control of the consumer replica checks: fewer consumer replicas
// than the stream's with limits retention, and equal ones with any.
func TestNewAcceptsConsumerReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, s := range []serveradmin.StreamConfig{
		{Replicas: 3, ConsumerReplicas: 1, Retention: serveradmin.RetentionLimits},
		{Replicas: 3, ConsumerReplicas: 3, Retention: serveradmin.RetentionWorkQueue},
		{Replicas: 3, Retention: serveradmin.RetentionInterest},
	} {
		cfg := e.config("nats://127.0.0.1:4222")
		s.Name = stream
		cfg.Stream = s
		if _, err := serveradmin.New(cfg); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

func TestNewAcceptsServerLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, u := range []string{"nats://127.0.0.1:4222", "127.0.0.1:4222", "nats://a:4222, tls://b:4222", "nats://user:pass@host:4222"} {
		cfg := e.config(u)
		if _, err := serveradmin.New(cfg); err != nil {
			t.Errorf("New(URL %q): %v", u, err)
		}
	}
}

func TestStartRefusesUnmintableUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config("nats://127.0.0.1:4222")
	boom := errors.New("no seed")
	cfg.AdminUser = func() (string, []byte, error) { return "", nil, boom }
	c, err := serveradmin.New(cfg)
	must(t, err)
	defer c.Close()
	if err := c.Start(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Start error = %v, want %v", err, boom)
	}
}

type streamView struct {
	Subjects   []string
	Retention  jetstream.RetentionPolicy
	Storage    jetstream.StorageType
	Replicas   int
	MaxAge     time.Duration
	Duplicates time.Duration
}

func streamOf(t *testing.T, js jetstream.JetStream) (streamView, error) {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		return streamView{}, err
	}
	c := s.CachedInfo().Config
	return streamView{c.Subjects, c.Retention, c.Storage, c.Replicas, c.MaxAge, c.Duplicates}, nil
}

// admin is an independent CONTROL admin connection for inspecting state.
func (e *env) admin(url string) jetstream.JetStream {
	e.t.Helper()
	tok, seed, err := jwtauthority.ControlAdminUser(e.ctlSeed)
	must(e.t, err)
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(tok, string(seed)))
	must(e.t, err)
	e.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	must(e.t, err)
	return js
}

func TestEnsureStream(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	c := e.client(e.config(srv.URL()))
	want := streamView{
		Subjects: []string{"rxc.*.*.cmd"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		Replicas: 1, MaxAge: time.Hour, Duplicates: 2 * time.Minute,
	}

	// Connecting ensures the stream without being asked.
	eventually(t, 5*time.Second, "stream created on connect", func() bool { _, err := streamOf(t, adm); return err == nil })
	got, err := streamOf(t, adm)
	must(t, err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream after connect (-want +got):\n%s", diff)
	}

	if err := c.EnsureStream(context.Background()); err != nil {
		t.Fatalf("EnsureStream on an existing stream: %v", err)
	}

	cfg := e.config(srv.URL())
	cfg.Stream.MaxAge, cfg.Stream.Duplicates = 2*time.Hour, 5*time.Minute
	changed := e.client(cfg)
	if err := changed.EnsureStream(context.Background()); err != nil {
		t.Fatalf("EnsureStream with a changed max age: %v", err)
	}
	want.MaxAge, want.Duplicates = 2*time.Hour, 5*time.Minute
	got, err = streamOf(t, adm)
	must(t, err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream after update (-want +got):\n%s", diff)
	}
}

// With limits retention an acked command stays in the stream (bounded per
// sensor) while the sensor's consumer does not deliver it again.
func TestLimitsRetention(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	cfg := e.config(srv.URL())
	cfg.Stream.Retention, cfg.Stream.MaxMsgsPerSubject = serveradmin.RetentionLimits, 3
	c := e.client(cfg)
	ctx := context.Background()
	must(t, c.EnsureStream(ctx))
	st, err := adm.Stream(ctx, stream)
	must(t, err)
	if got := st.CachedInfo().Config; got.Retention != jetstream.LimitsPolicy || got.MaxMsgsPerSubject != 3 {
		t.Fatalf("stream retention %v, per-subject cap %d; want limits and 3", got.Retention, got.MaxMsgsPerSubject)
	}
	tPub, tSeed := e.tenant("t1")
	sensor := topology.Sensor{Stream: stream, TenantID: "t1", SensorID: "s1"}
	must(t, c.EnsureConsumer(ctx, sensor))
	bnc, err := connect(srv.URL(), e.user(e.ctlPub, e.ctlSeed, "backend", topology.BackendPermissions()))
	must(t, err)
	defer bnc.Close()
	bjs, err := jetstream.New(bnc)
	must(t, err)
	for i := range 5 {
		_, err := bjs.Publish(ctx, sensor.CommandSubject(), []byte{byte('0' + i)})
		must(t, err)
	}
	_, sjs := sensorConn(t, srv.URL(), sensor, e.user(tPub, tSeed, sensor.SensorID, sensor.Permissions()))
	cons, err := sjs.Consumer(ctx, stream, sensor.Consumer())
	must(t, err)
	var got []string
	for range 3 {
		m, err := cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		must(t, err)
		got = append(got, string(m.Data()))
		must(t, m.DoubleAck(ctx))
	}
	if diff := cmp.Diff([]string{"2", "3", "4"}, got); diff != "" {
		t.Errorf("commands delivered (-want +got): the cap keeps the newest 3\n%s", diff)
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(300 * time.Millisecond)); err == nil {
		t.Error("an acked command was delivered again")
	}
	info, err := st.Info(ctx)
	must(t, err)
	if info.State.Msgs != 3 {
		t.Errorf("stream holds %d messages, want the 3 acked ones kept", info.State.Msgs)
	}
}

func TestEnsureStreamReportsRefusedChange(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	if _, err := adm.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{topology.CommandWildcard}, Storage: jetstream.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	c := e.client(e.config(srv.URL()))
	if err := c.EnsureStream(context.Background()); err == nil {
		t.Fatal("EnsureStream changed retention and storage of an existing stream without an error")
	}
	got, err := streamOf(t, adm)
	must(t, err)
	if got.Storage != jetstream.MemoryStorage {
		t.Errorf("storage = %v, want the existing memory storage left alone", got.Storage)
	}
}

func TestEnsureConsumer(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	c := e.client(e.config(srv.URL()))
	s := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.EnsureConsumer(context.Background(), s)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureConsumer: %v", err)
		}
	}

	st, err := adm.Stream(context.Background(), stream)
	must(t, err)
	var names []string
	lister := st.ConsumerNames(context.Background())
	for n := range lister.Name() {
		names = append(names, n)
	}
	must(t, lister.Err())
	if diff := cmp.Diff([]string{"cmd-acme-s-1"}, names); diff != "" {
		t.Errorf("consumers (-want +got):\n%s", diff)
	}

	cons, err := st.Consumer(context.Background(), "cmd-acme-s-1")
	must(t, err)
	cc := cons.CachedInfo().Config
	type consumerView struct {
		Durable, FilterSubject string
		AckPolicy              jetstream.AckPolicy
		DeliverPolicy          jetstream.DeliverPolicy
		AckWait                time.Duration
		MaxDeliver             int
		MaxAckPending          int
	}
	want := consumerView{Durable: "cmd-acme-s-1", FilterSubject: "rxc.acme.s-1.cmd", AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 5 * time.Second, MaxDeliver: 10, MaxAckPending: 16}
	got := consumerView{cc.Durable, cc.FilterSubject, cc.AckPolicy, cc.DeliverPolicy, cc.AckWait, cc.MaxDeliver, cc.MaxAckPending}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("consumer config (-want +got):\n%s", diff)
	}
}

func TestEnsureConsumerRecreatesMissingStream(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	c := e.client(e.config(srv.URL()))
	eventually(t, 5*time.Second, "stream created on connect", func() bool { _, err := streamOf(t, adm); return err == nil })
	// The server removes the stream's files after answering the delete;
	// recreating the stream before they are gone fails inside the server.
	dir := filepath.Join(srv.StoreDir(), "jetstream", e.ctlPub, "streams", stream)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("stream files not where expected: %v", err)
	}
	must(t, adm.DeleteStream(context.Background(), stream))
	eventually(t, 5*time.Second, "stream files removed", func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) })

	if err := c.EnsureConsumer(context.Background(), topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}); err != nil {
		t.Fatalf("EnsureConsumer without a stream: %v", err)
	}
	if _, err := adm.Consumer(context.Background(), stream, "cmd-acme-s-1"); err != nil {
		t.Fatalf("consumer after EnsureConsumer: %v", err)
	}
}

func TestEnsureConsumerRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, err := serveradmin.New(e.config("nats://127.0.0.1:1"))
	must(t, err)
	tests := []struct {
		name   string
		sensor topology.Sensor
		want   error
	}{
		{"tenant id with a dot", topology.Sensor{Stream: stream, TenantID: "a.b", SensorID: "s"}, ids.ErrInvalidID},
		{"sensor id with a wildcard", topology.Sensor{Stream: stream, TenantID: "a", SensorID: "*"}, ids.ErrInvalidID},
		{"another stream", topology.Sensor{Stream: "OTHER", TenantID: "a", SensorID: "s"}, serveradmin.ErrStreamMismatch},
		{"not connected", topology.Sensor{Stream: stream, TenantID: "a", SensorID: "s"}, serveradmin.ErrNotConnected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.EnsureConsumer(context.Background(), tc.sensor); !errors.Is(err, tc.want) {
				t.Fatalf("EnsureConsumer error = %v, want %v", err, tc.want)
			}
		})
	}
}

// sensorConn connects a sensor the way sensor agents connect (docs/provisioner.md, "Isolation model").
func sensorConn(t *testing.T, url string, s topology.Sensor, u provisioning.MintedUser) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := connect(url, u, nats.CustomInboxPrefix(s.InboxPrefix()))
	if err != nil {
		t.Fatalf("sensor %s connect: %v", s.SensorID, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithAPIPrefix(nc, topology.APIPrefix)
	must(t, err)
	return nc, js
}

func TestSensorPullsAndAcksOwnCommands(t *testing.T) {
	t.Parallel()
	e, srv, adm := running(t)
	url := srv.URL()
	c := e.client(e.config(url))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tPub, tSeed := e.tenant("acme")
	s1 := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}
	s2 := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-2"}
	for _, s := range []topology.Sensor{s1, s2} {
		must(t, c.EnsureConsumer(ctx, s))
	}
	backend := e.user(e.ctlPub, e.ctlSeed, "backend", topology.BackendPermissions())
	bnc, err := connect(url, backend)
	must(t, err)
	defer bnc.Close()
	bjs, err := jetstream.New(bnc)
	must(t, err)
	_, err = bjs.Publish(ctx, s1.CommandSubject(), []byte(`{"action":"start"}`), jetstream.WithMsgID("c-1"))
	must(t, err)

	_, js := sensorConn(t, url, s1, e.user(tPub, tSeed, s1.SensorID, s1.Permissions()))
	cons, err := js.Consumer(ctx, stream, s1.Consumer())
	if err != nil {
		t.Fatalf("sensor looks up its consumer through %s: %v", topology.APIPrefix, err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
	must(t, err)
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack across accounts: %v", err)
		}
	}
	must(t, batch.Error())
	if diff := cmp.Diff([]string{`{"action":"start"}`}, got); diff != "" {
		t.Fatalf("fetched commands (-want +got):\n%s", diff)
	}
	eventually(t, 5*time.Second, "acked command removed from the work queue", func() bool {
		st, err := adm.Stream(ctx, stream)
		return err == nil && st.CachedInfo().State.Msgs == 0
	})

	lookup, lcancel := context.WithTimeout(ctx, time.Second)
	defer lcancel()
	if _, err := js.Consumer(lookup, stream, s2.Consumer()); err == nil {
		t.Error("sensor s-1 could look up the consumer of sensor s-2")
	}
}

func TestPushAccountRevokesLiveUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := e.start(0)
	url := srv.URL()
	c := e.client(e.config(url))

	tPub, tSeed := e.tenant("acme")
	s1 := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-1"}
	s2 := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "s-2"}
	u1 := e.user(tPub, tSeed, s1.SensorID, s1.Permissions())
	u2 := e.user(tPub, tSeed, s2.SensorID, s2.Permissions())
	nc1, _ := sensorConn(t, url, s1, u1)
	nc2, _ := sensorConn(t, url, s2, u2)

	revoked := e.sign(provisioning.AccountSpec{PubKey: tPub, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme",
		Revocations: []provisioning.Revocation{{AccountPubKey: tPub, UserPubKey: u1.PubKey, RevokedAt: time.Now()}}})
	if err := c.PushAccount(context.Background(), tPub, revoked); err != nil {
		t.Fatalf("PushAccount: %v", err)
	}
	eventually(t, 2*time.Second, "revoked sensor disconnected", func() bool { return !nc1.IsConnected() })
	if nc, err := connect(url, u1); err == nil {
		nc.Close()
		t.Fatal("revoked user could connect again")
	}
	if !nc2.IsConnected() {
		t.Fatal("sibling sensor was disconnected")
	}
	if err := nc2.Flush(); err != nil {
		t.Fatalf("sibling sensor round trip: %v", err)
	}
}

func TestPushAccountReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := e.start(0)
	c := e.client(e.config(srv.URL()))

	// A foreign operator's JWT for a loaded account is refused.
	_, otherSeed, err := jwtauthority.NewOperatorKey()
	must(t, err)
	other, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: otherSeed, Stream: stream,
		ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	must(t, err)
	foreign, err := other.SignAccount(provisioning.AccountSpec{PubKey: e.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl})
	must(t, err)
	ctl := e.sign(provisioning.AccountSpec{PubKey: e.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl})
	unloadedPub, _, err := e.signer.NewAccountKey()
	must(t, err)
	unloaded := e.sign(provisioning.AccountSpec{PubKey: unloadedPub, Name: "later", Kind: provisioning.KindTenant, TenantID: "later"})

	tests := []struct {
		name     string
		pub, jwt string
		want     error
	}{
		{"loaded account updated", e.ctlPub, ctl, nil},
		{"account not loaded yet is skipped", unloadedPub, unloaded, nil},
		{"JWT of a foreign operator", e.ctlPub, foreign, serveradmin.ErrClaimUpdate},
		{"JWT of another account", e.ctlPub, unloaded, serveradmin.ErrClaimUpdate},
		{"not a JWT", e.ctlPub, "garbage", serveradmin.ErrClaimUpdate},
		{"empty JWT", e.ctlPub, "", serveradmin.ErrClaimUpdate},
		{"user key", "U" + e.ctlPub[1:], ctl, provisioning.ErrInvalidPublicKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.PushAccount(context.Background(), tc.pub, tc.jwt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("PushAccount error = %v, want %v", err, tc.want)
			}
		})
	}
}

// The provisioner starts before nats-server (which waits for the resolver):
// Start must not block, calls must fail fast while NATS is away, and the
// client must connect when the server appears and again after a restart.
func TestStartBeforeServerAndReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	port := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	logs := &logBuffer{}
	cfg := e.config(url)
	cfg.Logger = logs.Logger()
	cfg.MaxReconnectWait = 200 * time.Millisecond
	var minted []string
	var mintMu sync.Mutex
	record := func(f func() (string, []byte, error)) func() (string, []byte, error) {
		return func() (string, []byte, error) {
			tok, seed, err := f()
			mintMu.Lock()
			minted = append(minted, tok, string(seed))
			mintMu.Unlock()
			return tok, append([]byte(nil), seed...), err
		}
	}
	cfg.SystemUser, cfg.AdminUser = record(cfg.SystemUser), record(cfg.AdminUser)
	c, err := serveradmin.New(cfg)
	must(t, err)
	connects := make(chan context.Context, 10)
	c.OnConnect(func(ctx context.Context) { connects <- ctx })

	started := time.Now()
	must(t, c.Start(context.Background()))
	if d := time.Since(started); d > 2500*time.Millisecond {
		t.Errorf("Start took %s with NATS down; it must not wait for NATS", d)
	}
	if c.Ready() {
		t.Fatal("Ready with no server")
	}
	assertFailsFast(t, c, e.ctlPub)

	srv := e.start(port)
	hookCtx := awaitConnect(t, connects)
	eventually(t, 10*time.Second, "ready once the server is up", c.Ready)
	ctl := e.sign(provisioning.AccountSpec{PubKey: e.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl})
	if err := c.PushAccount(context.Background(), e.ctlPub, ctl); err != nil {
		t.Fatalf("PushAccount once connected: %v", err)
	}

	srv.Stop()
	eventually(t, 5*time.Second, "not ready after the server stops", func() bool { return !c.Ready() })
	assertFailsFast(t, c, e.ctlPub)

	e.start(port)
	awaitConnect(t, connects)
	eventually(t, 10*time.Second, "ready after the server restarts", c.Ready)
	if err := c.PushAccount(context.Background(), e.ctlPub, ctl); err != nil {
		t.Fatalf("PushAccount after reconnect: %v", err)
	}

	c.Close()
	if hookCtx.Err() == nil {
		t.Error("OnConnect context still live after Close")
	}
	out := logs.String()
	if !strings.Contains(out, "connected to NATS") {
		t.Errorf("logs do not record the connection:\n%s", out)
	}
	mintMu.Lock()
	defer mintMu.Unlock()
	for _, secret := range minted {
		if secret != "" && strings.Contains(out, secret) {
			t.Fatalf("logs contain a minted JWT or seed")
		}
	}
}

func awaitConnect(t *testing.T, connects chan context.Context) context.Context {
	t.Helper()
	select {
	case ctx := <-connects:
		if ctx.Err() != nil {
			t.Fatalf("OnConnect got a finished context: %v", ctx.Err())
		}
		return ctx
	case <-time.After(10 * time.Second):
		t.Fatal("OnConnect not called within 10s of the server starting")
		return nil
	}
}

// assertFailsFast checks that calls needing NATS return ErrNotConnected well
// before the 5s request timeout.
func assertFailsFast(t *testing.T, c *serveradmin.Client, acct string) {
	t.Helper()
	calls := map[string]func() error{
		"PushAccount":  func() error { return c.PushAccount(context.Background(), acct, "eyJ") },
		"EnsureStream": func() error { return c.EnsureStream(context.Background()) },
		"EnsureConsumer": func() error {
			return c.EnsureConsumer(context.Background(), topology.Sensor{Stream: stream, TenantID: "a", SensorID: "b"})
		},
	}
	for name, call := range calls {
		began := time.Now()
		err := call()
		if !errors.Is(err, serveradmin.ErrNotConnected) {
			t.Errorf("%s while disconnected: error = %v, want %v", name, err, serveradmin.ErrNotConnected)
		}
		if d := time.Since(began); d > 2500*time.Millisecond {
			t.Errorf("%s while disconnected took %s; want an immediate failure", name, d)
		}
	}
}
