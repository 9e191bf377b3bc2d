package app_test

// The isolation attack suite: every principal the provisioner mints (two
// sensors in each of two tenants whose names collide in consumer names, the
// backend, the control admin) tries every subject shape that reaches a
// consumer, stream or inbox not its own, against a real nats-server in
// operator mode resolving through the real provisioner. Each cell asserts
// the denial twice over: nats-server reports a permissions violation for the
// exact subject, and afterwards every victim's consumer shows nothing
// delivered, acked or terminated and still hands its own message to its
// owner. Positive controls run in the same stack. docs/provisioner.md's isolation table
// names this file.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// ackBodies are every body nats-server acts on at an ack subject.
var ackBodies = []string{"+ACK", "+NXT", "+WPI", "-NAK", "+TERM"}

// principal is one connection under attack-suite control. It records every
// permissions violation nats-server reports and every message it receives.
type principal struct {
	name  string
	nc    *nats.Conn
	inbox string // where its requests' replies go

	mu         sync.Mutex
	violations map[string]bool // subject → reported
	got        []*nats.Msg
}

func newPrincipal(t *testing.T, name, url, creds, inboxPrefix string) *principal {
	t.Helper()
	p := &principal{name: name, violations: map[string]bool{}}
	opts := []nats.Option{
		nats.UserJWTAndSeed(mustJWT(t, creds), mustSeed(t, creds)),
		nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			p.record(err)
		}),
	}
	if inboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(inboxPrefix))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("%s connects: %v", name, err)
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	p.inbox = nc.NewInbox()
	if _, err := nc.Subscribe(p.inbox+".>", func(m *nats.Msg) {
		p.mu.Lock()
		p.got = append(p.got, m)
		p.mu.Unlock()
	}); err != nil {
		t.Fatalf("%s subscribes its own inbox: %v", name, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// record keeps the subject of a permissions violation.
func (p *principal) record(err error) {
	msg := err.Error()
	if !strings.Contains(strings.ToLower(msg), "permissions violation") {
		return
	}
	if i := strings.Index(msg, `"`); i >= 0 {
		if j := strings.LastIndex(msg, `"`); j > i {
			p.mu.Lock()
			p.violations[msg[i+1:j]] = true
			p.mu.Unlock()
		}
	}
}

// attempt sends one publish (with a reply into the principal's inbox).
func (p *principal) attempt(t *testing.T, subject, body string) {
	t.Helper()
	if err := p.nc.PublishRequest(subject, fmt.Sprintf("%s.%d", p.inbox, time.Now().UnixNano()), []byte(body)); err != nil {
		t.Fatalf("%s publish %s: %v", p.name, subject, err)
	}
}

// denied waits until nats-server has reported a violation for every subject
// (publish or subscribe) and the principal received nothing meanwhile.
func (p *principal) denied(t *testing.T, subjects []string) {
	t.Helper()
	if err := p.nc.Flush(); err != nil {
		t.Fatalf("%s flush: %v", p.name, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		p.mu.Lock()
		var missing []string
		for _, s := range subjects {
			if !p.violations[s] {
				missing = append(missing, s)
			}
		}
		got := len(p.got)
		p.mu.Unlock()
		if got > 0 {
			p.mu.Lock()
			m := p.got[0]
			p.mu.Unlock()
			t.Fatalf("%s received a message on %s (%q) while attacking", p.name, m.Subject, m.Data)
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no permissions violation reported for %d of %d attempts, e.g. %q", p.name, len(missing), len(subjects), missing[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !p.nc.IsConnected() {
		t.Fatalf("%s was disconnected", p.name)
	}
}

// received reports whether the principal got a message whose body is data.
func (p *principal) received(data string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.got {
		if string(m.Data) == data {
			return true
		}
	}
	return false
}

// controlAdmin connects as the JetStream administrator (what the
// provisioner mints for itself), to read consumer state as ground truth.
func controlAdmin(t *testing.T, s *provisionertest.Stack) (string, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	_, store := storeOf(t, s)
	ctl, err := store.Account(ctx, s.Operator.ControlAccount)
	if err != nil {
		t.Fatal(err)
	}
	tok, seed, err := jwtauthority.ControlAdminUser(ctl.Seed)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := connectCreds(t, s.NATSURL, string(creds))
	if err != nil {
		t.Fatalf("control admin connects: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return string(creds), js
}

// untouched asserts the consumer delivered nothing and still holds want
// messages.
func untouched(t *testing.T, ctx context.Context, admin jetstream.JetStream, stream, consumer string, want uint64) {
	t.Helper()
	c, err := admin.Consumer(ctx, stream, consumer)
	if err != nil {
		t.Fatalf("consumer %s: %v", consumer, err)
	}
	info := c.CachedInfo()
	if info.Delivered.Consumer != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 || info.NumPending != want {
		t.Errorf("consumer %s after the attacks: delivered %d, ack pending %d, redelivered %d, pending %d; want nothing delivered and %d pending",
			consumer, info.Delivered.Consumer, info.NumAckPending, info.NumRedelivered, info.NumPending, want)
	}
}

// victimV1 and victimV2 are every ack subject shape aimed at victim's
// consumer, including the crafted 9-token one that rode the first
// release's v2 grant ("$JS.ACK.<stream>.<victim>.<stream>.<own>.1.1.1").
func ackAttacks(stream, victim, ownStream, own string) []string {
	return []string{
		"$JS.ACK." + stream + "." + victim + ".1.1.1.1.1",
		"$JS.ACK." + stream + "." + victim + "." + ownStream + "." + own + ".1.1.1",
		"$JS.ACK._.HASH." + stream + "." + victim + ".1.1.1.1.1",
		"$JS.ACK._.HASH." + stream + "." + victim + ".1.1.1.1.1.1",
		"$JS.ACK." + stream + "." + victim + ".1.1.1.1.1.1",
		"$JS.ACK." + stream + "." + victim + ".>",
		"$JS.ACK." + stream + ".*.1.1.1.1.1",
	}
}

// The suite runs against each command stream retention: limits keeps acked
// commands in the stream and interest lets consumers overlap, and neither
// may open a way into another sensor's commands.
func TestIsolationAttackSuite(t *testing.T) {
	for _, retention := range []string{"workqueue", "interest", "limits"} {
		t.Run(retention, func(t *testing.T) {
			t.Parallel()
			isolationAttackSuite(t, retention)
		})
	}
}

// isolationWorld is the stack the suite attacks: two sensors in each of two
// tenants whose names collide in consumer names, each with a secret command
// waiting, one secret event for the writer, and the backend's and the
// control admin's connections.
type isolationWorld struct {
	s         *provisionertest.Stack
	users     map[string]provisionerwire.UserResponse // "tenant/sensor" → user
	attackers map[string]*principal                   // "tenant/sensor" → its connection
	backend   *principal
	adminP    *principal
	admin     jetstream.JetStream // ground truth
	bjs       jetstream.JetStream // the backend's JetStream, for the controls
}

const isoStream, isoEvents = topology.DefaultStream, topology.DefaultEventStream

// secret is the command waiting for key's sensor ("events": the event).
func secret(key string) string { return "secret-of-" + key }

func newIsolationWorld(t *testing.T, ctx context.Context, retention string) *isolationWorld {
	w := &isolationWorld{s: provisionertest.Start(t, provisionertest.Options{CommandStreamRetention: retention}),
		users: map[string]provisionerwire.UserResponse{}, attackers: map[string]*principal{}}
	for _, tn := range []string{"acme", "acme-eu"} {
		account(t, w.s, tn)
		for _, sn := range []string{"s1", "s2"} {
			w.users[tn+"/"+sn] = sensorUser(t, w.s, tn, sn)
		}
	}
	_, w.admin = controlAdmin(t, w.s)
	_, w.bjs = backend(t, w.s)
	for key, u := range w.users {
		if _, err := w.bjs.Publish(ctx, u.CommandSubject, []byte(secret(key))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.bjs.Publish(ctx, topology.EventSubject("acme", "s1"), []byte(secret("events"))); err != nil {
		t.Fatal(err)
	}
	for key, u := range w.users {
		w.attackers[key] = newPrincipal(t, key, w.s.NATSURL, u.Creds, u.InboxPrefix)
	}
	status, body := w.s.Post("/backend-user", map[string]string{"name": "attack-backend"})
	b := decode[provisionerwire.BackendUserResponse](t, status, body, 200, 201)
	w.backend = newPrincipal(t, "backend", w.s.NATSURL, b.Creds, "")
	adminCreds, _ := controlAdmin(t, w.s)
	w.adminP = newPrincipal(t, "control admin", w.s.NATSURL, adminCreds, "")
	return w
}

// attacks are what one principal tries: publishes (each subject once per
// body) and subscriptions. nats-server must deny every one.
type attacks struct {
	pubs []attackPub
	subs []string
}

type attackPub struct {
	subject string
	bodies  []string
}

func (a *attacks) pub(subject string, bodies ...string) {
	a.pubs = append(a.pubs, attackPub{subject, bodies})
}

// try makes p try every attack and waits for every denial; a message that
// reaches p meanwhile, on its inbox or a subscription, fails the test.
func (p *principal) try(t *testing.T, a attacks) {
	t.Helper()
	var subjects []string
	for _, x := range a.pubs {
		for _, body := range x.bodies {
			p.attempt(t, x.subject, body)
		}
		subjects = append(subjects, x.subject)
	}
	for _, subj := range a.subs {
		if _, err := p.nc.Subscribe(subj, func(m *nats.Msg) {
			p.mu.Lock()
			p.got = append(p.got, m)
			p.mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, subj)
	}
	p.denied(t, subjects)
}

// sensorAttacks: sensor u (key) at every other sensor's consumer, ack
// subjects, status and commands; at the event writer; at stream-wide and
// account-wide APIs; and subscribing anything but its own inbox.
func sensorAttacks(key string, u provisionerwire.UserResponse, users map[string]provisionerwire.UserResponse) attacks {
	var a attacks
	for vkey, v := range users {
		if vkey == key {
			continue
		}
		for _, subj := range ackAttacks(isoStream, v.Consumer, isoStream, u.Consumer) {
			a.pub(subj, ackBodies...)
		}
		a.pub(u.JSAPIPrefix+".CONSUMER.MSG.NEXT."+isoStream+"."+v.Consumer, `{"batch":1,"expires":1000000000}`)
		a.pub(u.JSAPIPrefix+".CONSUMER.INFO."+isoStream+"."+v.Consumer, "")
		a.pub("$JS.API.CONSUMER.MSG.NEXT."+isoStream+"."+v.Consumer, `{"batch":1}`)
		a.pub(v.StatusSubject, `{"state":"running"}`)
		a.pub(v.CommandSubject, `{"action":"stop"}`)
	}
	for _, subj := range ackAttacks(isoEvents, topology.EventWriter, isoStream, u.Consumer) {
		a.pub(subj, ackBodies...)
	}
	for _, subj := range []string{
		u.JSAPIPrefix + ".CONSUMER.MSG.NEXT." + isoEvents + "." + topology.EventWriter,
		u.JSAPIPrefix + ".CONSUMER.MSG.NEXT." + isoStream + ".*",
		u.JSAPIPrefix + ".CONSUMER.MSG.NEXT." + isoStream + ".>",
		u.JSAPIPrefix + ".CONSUMER.CREATE." + isoStream + ".evil",
		u.JSAPIPrefix + ".CONSUMER.DURABLE.CREATE." + isoStream + ".evil",
		u.JSAPIPrefix + ".STREAM.INFO." + isoStream,
		u.JSAPIPrefix + ".STREAM.MSG.GET." + isoStream,
		u.JSAPIPrefix + ".DIRECT.GET." + isoStream,
		"$JS.API.INFO",
		"$JS.API.STREAM.MSG.GET." + isoStream,
		"$JS.API.DIRECT.GET." + isoStream,
		"$JS.FC." + isoStream + "." + u.Consumer + ".1.1",
		u.CommandSubject,
		"rxc.*.*.status",
		"rxc." + u.TenantID + ".*.status",
		topology.EventSubject(u.TenantID, u.SensorID),
		"$SYS.REQ.ACCOUNT.PING.CONNZ",
	} {
		a.pub(subj, "+NXT")
	}
	for _, subj := range []string{"_INBOX.>", "_INBOX_acme_s2.>", "_INBOX_acme-eu_s1.>", ">", "rxc.>", "$JS.ACK.>", "ctrl.API.>"} {
		if subj != u.InboxPrefix+".>" {
			a.subs = append(a.subs, subj)
		}
	}
	return a
}

// backendAttacks: the backend at every sensor's consumer and status, at
// stream reads and consumer creation, and subscribing wide.
func backendAttacks(users map[string]provisionerwire.UserResponse) attacks {
	var a attacks
	for _, v := range users {
		for _, subj := range ackAttacks(isoStream, v.Consumer, isoEvents, topology.EventWriter) {
			a.pub(subj, ackBodies...)
		}
		a.pub("$JS.API.CONSUMER.MSG.NEXT."+isoStream+"."+v.Consumer, `{"batch":1}`)
		a.pub("$JS.API.CONSUMER.INFO."+isoStream+"."+v.Consumer, `{"batch":1}`)
		a.pub(v.StatusSubject, `{"batch":1}`)
	}
	for _, subj := range []string{"$JS.API.INFO", "$JS.API.STREAM.MSG.GET." + isoStream, "$JS.API.DIRECT.GET." + isoStream, "$JS.API.CONSUMER.CREATE." + isoStream + ".evil", "$SYS.REQ.ACCOUNT.PING.CONNZ"} {
		a.pub(subj, `{}`)
	}
	a.subs = []string{">", "$JS.ACK.>", "_INBOX_acme_s1.>", "rxc.*.*.cmd"}
	return a
}

// adminAttacks: the control admin at the sensors' ack subjects, commands
// and status, and subscribing to them.
func adminAttacks(users map[string]provisionerwire.UserResponse) attacks {
	var a attacks
	for _, v := range users {
		for _, subj := range ackAttacks(isoStream, v.Consumer, isoStream, "x")[:3] {
			a.pub(subj, "+NXT")
		}
		a.pub(v.CommandSubject, "x")
		a.pub(v.StatusSubject, "x")
	}
	a.subs = []string{"rxc.>", "$JS.ACK.>", "_INBOX_acme_s1.>"}
	return a
}

func isolationAttackSuite(t *testing.T, retention string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIsolationWorld(t, ctx, retention)

	type attacker struct {
		name    string
		p       *principal
		attacks attacks
	}
	var cases []attacker
	for key, p := range w.attackers {
		cases = append(cases, attacker{"sensor " + key, p, sensorAttacks(key, w.users[key], w.users)})
	}
	cases = append(cases,
		attacker{"backend", w.backend, backendAttacks(w.users)},
		attacker{"control admin", w.adminP, adminAttacks(w.users)})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.p.try(t, tc.attacks) })
	}

	// Ground truth: no victim consumer delivered, acked or terminated
	// anything; the writer's event is still pending.
	for _, u := range w.users {
		untouched(t, ctx, w.admin, isoStream, u.Consumer, 1)
	}
	untouched(t, ctx, w.admin, isoEvents, topology.EventWriter, 1)
	for key, p := range w.attackers {
		for vkey := range w.users {
			if vkey != key && p.received(secret(vkey)) {
				t.Errorf("%s received %s's command", key, vkey)
			}
		}
	}
	t.Run("reply-subject injection", func(t *testing.T) { w.replyInjection(t, ctx) })
	t.Run("positive controls", func(t *testing.T) { w.positiveControls(t, ctx) })
}

// replyInjection: acme/s1 pulls its own consumer with its sibling's inbox
// as the reply. nats-server delivers acme/s1's own command there (it cannot
// restrict reply subjects); nothing of the sibling's, and nothing crosses
// into the other tenant, whose identical inbox name lives in another
// account.
func (w *isolationWorld) replyInjection(t *testing.T, ctx context.Context) {
	sibling, other := w.attackers["acme/s2"], w.attackers["acme-eu/s1"]
	sibSub, err := sibling.nc.SubscribeSync(w.users["acme/s2"].InboxPrefix + ".injected")
	if err != nil {
		t.Fatal(err)
	}
	otherSub, err := other.nc.SubscribeSync(w.users["acme-eu/s1"].InboxPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	sibling.nc.Flush()
	other.nc.Flush()
	a, own := w.attackers["acme/s1"], w.users["acme/s1"]
	a.mu.Lock()
	a.got = nil
	a.mu.Unlock()
	req := []byte(`{"batch":1,"expires":2000000000}`)
	next := own.JSAPIPrefix + ".CONSUMER.MSG.NEXT." + isoStream + "." + own.Consumer
	for _, reply := range []string{w.users["acme/s2"].InboxPrefix + ".injected", "_INBOX_acme-eu_s1.injected"} {
		if err := a.nc.PublishRequest(next, reply, req); err != nil {
			t.Fatal(err)
		}
	}
	a.nc.Flush()
	m, err := sibSub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("the documented residual did not occur (nothing delivered to the sibling's inbox): %v — update docs/provisioner.md if nats-server now prevents it", err)
	}
	if string(m.Data) != secret("acme/s1") {
		t.Fatalf("sibling's inbox received %q, want only the injector's own command", m.Data)
	}
	if m, err := otherSub.NextMsg(2 * time.Second); err == nil {
		t.Fatalf("other tenant's inbox received %q on %s", m.Data, m.Subject)
	}
	untouched(t, ctx, w.admin, isoStream, w.users["acme/s2"].Consumer, 1)
}

// positiveControls: every sensor still pulls and acks its own command (v1
// ack subjects, including +NXT on its own ack subject), the backend still
// loads events through event-writer.
func (w *isolationWorld) positiveControls(t *testing.T, ctx context.Context) {
	pullOwn := func(who string, js jetstream.JetStream, stream, consumer, want string) {
		t.Helper()
		cons, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			t.Fatalf("%s binds its consumer: %v", who, err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("%s pulls its own message: %v", who, err)
		}
		if string(msg.Data()) != want {
			t.Fatalf("%s got %q, want its own message", who, msg.Data())
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("%s acks its own message: %v", who, err)
		}
	}
	for key, u := range w.users {
		if key == "acme/s1" {
			continue // its command went to the sibling's inbox above
		}
		sc, err := connectSensor(t, w.s, u)
		if err != nil {
			t.Fatal(err)
		}
		pullOwn(key, sc.js, isoStream, u.Consumer, secret(key))
	}
	pullOwn("backend", w.bjs, isoEvents, topology.EventWriter, secret("events"))
}

// consumerNameTaken wants POST /users for tenant/sensor refused with 409
// consumer_name_taken.
func consumerNameTaken(t *testing.T, s *provisionertest.Stack, tenant, sensor string) {
	t.Helper()
	status, body := s.Post("/users", map[string]string{"tenantId": tenant, "sensorId": sensor})
	if status != 409 || !strings.Contains(string(body), `"consumer_name_taken"`) {
		t.Fatalf("POST /users %s/%s = %d %s; want 409 consumer_name_taken", tenant, sensor, status, body)
	}
}

// consumerFilter is the filter subject of the command stream's consumer
// name, as the JetStream administrator reads it.
func consumerFilter(t *testing.T, ctx context.Context, admin jetstream.JetStream, name string) string {
	t.Helper()
	c, err := admin.Consumer(ctx, topology.DefaultStream, name)
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo().Config.FilterSubject
}

// TestConsumerNameCollision: acme/eu-s1 and acme-eu/s1 both spell
// cmd-acme-eu-s1. The second pair is refused with 409 and nothing of the
// first pair's changes: its consumer still filters its subject and its
// commands still reach it.
func TestConsumerNameCollision(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	account(t, s, "acme")
	account(t, s, "acme-eu")
	first := sensorUser(t, s, "acme-eu", "s1")
	_, admin := controlAdmin(t, s)

	for range 2 { // a retry is refused the same way
		consumerNameTaken(t, s, "acme", "eu-s1")
	}
	if f := consumerFilter(t, ctx, admin, "cmd-acme-eu-s1"); f != "rxc.acme-eu.s1.cmd" {
		t.Fatalf("consumer re-pointed to %q", f)
	}
	// The owner's repeated request still answers with its user.
	again := sensorUser(t, s, "acme-eu", "s1")
	if again.UserPubKey != first.UserPubKey {
		t.Fatalf("owner's user changed: %s → %s", first.UserPubKey, again.UserPubKey)
	}
	_, bjs := backend(t, s)
	if _, err := bjs.Publish(ctx, "rxc.acme.eu-s1.cmd", []byte("for-acme")); err != nil {
		t.Fatal(err)
	}
	if _, err := bjs.Publish(ctx, first.CommandSubject, []byte("for-acme-eu")); err != nil {
		t.Fatal(err)
	}
	_, cons := ownConsumer(t, ctx, s, first)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil || string(msg.Data()) != "for-acme-eu" {
		t.Fatalf("owner pulls %v, %v; want its own command", msg, err)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Next(jetstream.FetchMaxWait(time.Second)); err == nil {
		t.Fatalf("owner received another pair's command %q", m.Data())
	}
}

// TestNoRepointOfForeignConsumer: a consumer that exists on the stream with
// another filter (made by hand, or by the first release's re-pointing) is
// never updated to the requesting pair's subject.
func TestNoRepointOfForeignConsumer(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	account(t, s, "acme")
	_, admin := controlAdmin(t, s)
	if _, err := admin.CreateConsumer(ctx, topology.DefaultStream, jetstream.ConsumerConfig{
		Durable: "cmd-acme-s9", FilterSubject: "rxc.other.s9.cmd", AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	consumerNameTaken(t, s, "acme", "s9") // over a foreign consumer
	if f := consumerFilter(t, ctx, admin, "cmd-acme-s9"); f != "rxc.other.s9.cmd" {
		t.Fatalf("foreign consumer re-pointed to %q", f)
	}
}

// TestUpgradeRevokesFirstReleaseUsers plants a sensor user minted with the
// first release's ack grants, shows the attack works with it (the test's
// negative control: the hole is real), restarts serve, and checks the user
// is revoked — refused by nats-server — while a new user from POST /users
// works and cannot repeat the attack.
func TestUpgradeRevokesFirstReleaseUsers(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const stream = topology.DefaultStream
	account(t, s, "acme")
	victim := sensorUser(t, s, "acme", "victim")
	attacker := sensorUser(t, s, "acme", "attacker")
	_, admin := controlAdmin(t, s)
	_, bjs := backend(t, s)
	if _, err := bjs.Publish(ctx, victim.CommandSubject, []byte("victim-secret")); err != nil {
		t.Fatal(err)
	}

	// Replace the attacker's user by one with the first release's grants,
	// stored as its active user (as an upgrade finds it).
	pool, store := storeOf(t, s)
	acct, err := store.TenantAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE nats_users SET revoked_at = now() WHERE user_pub_key = $1`, attacker.UserPubKey); err != nil {
		t.Fatal(err)
	}
	old := topology.Sensor{Stream: stream, TenantID: "acme", SensorID: "attacker"}
	signer, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: mustOperatorSeed(t, s), Stream: stream, ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	perms := topology.Permissions{
		Publish: []string{
			old.StatusSubject(),
			topology.APIPrefix + ".CONSUMER.MSG.NEXT." + stream + "." + old.Consumer(),
			topology.APIPrefix + ".CONSUMER.INFO." + stream + "." + old.Consumer(),
			"$JS.ACK." + stream + "." + old.Consumer() + ".>",
			"$JS.ACK.*.*." + stream + "." + old.Consumer() + ".>",
		},
		Subscribe: []string{old.InboxPrefix() + ".>"},
	}
	m, err := signer.MintUser(provisioning.UserSpec{AccountPubKey: acct.PubKey, AccountSeed: acct.Seed, Name: "attacker", Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.CreateUser(ctx, provisioning.User{PubKey: m.PubKey, AccountPubKey: acct.PubKey, Kind: provisioning.UserSensor,
		TenantID: "acme", SensorID: "attacker", Name: "attacker", Seed: m.Seed, JWT: m.JWT}); err != nil {
		t.Fatal(err)
	}
	oldCreds, err := jwt.FormatUserConfig(m.JWT, m.Seed)
	if err != nil {
		t.Fatal(err)
	}

	crafted := "$JS.ACK." + stream + "." + victim.Consumer + "." + stream + "." + old.Consumer() + ".1.1.1"
	steal := func(creds string) (string, error) {
		nc, err := nats.Connect(s.NATSURL, nats.UserJWTAndSeed(mustJWT(t, creds), mustSeed(t, creds)),
			nats.CustomInboxPrefix(old.InboxPrefix()), nats.MaxReconnects(0))
		if err != nil {
			return "", err
		}
		defer nc.Close()
		reply, err := nc.Request(crafted, []byte("+NXT"), 3*time.Second)
		if err != nil {
			return "", err
		}
		return string(reply.Data), nil
	}
	got, err := steal(string(oldCreds))
	if err != nil || got != "victim-secret" {
		t.Fatalf("negative control: the first release's grant should still steal through the crafted ack before the upgrade pass; got %q, %v", got, err)
	}
	// The theft delivered the victim's command once; let it be redelivered
	// to its owner after the ack wait, or count it here.
	s.StopServe()
	s.StartServe()
	s.WaitNATSReady()

	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := connectCreds(t, s.NATSURL, string(oldCreds))
		if err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first-release user still connects after the upgrade pass: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fresh := sensorUser(t, s, "acme", "attacker")
	if fresh.UserPubKey == m.PubKey {
		t.Fatal("POST /users returned the revoked user")
	}
	if _, err := steal(fresh.Creds); err == nil {
		t.Fatal("the new user's grants still reach the victim's consumer")
	}
	// The victim still gets its command (redelivered after the theft).
	_, cons := ownConsumer(t, ctx, s, victim)
	msg, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
	if err != nil || string(msg.Data()) != "victim-secret" {
		t.Fatalf("victim pulls %v, %v; want its command", msg, err)
	}
	_ = admin
}

func mustOperatorSeed(t *testing.T, s *provisionertest.Stack) []byte {
	t.Helper()
	seed, err := os.ReadFile(s.Config.OperatorSeedPath)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.TrimSpace(string(seed)))
}

// liveUserKeys reads, from nats-server's monitoring page (where anyone who
// can reach it sees them), the user keys connected in an account.
func liveUserKeys(t *testing.T, s *provisionertest.Stack, account string) []string {
	t.Helper()
	var connz struct {
		Conns []struct {
			Account        string `json:"account"`
			AuthorizedUser string `json:"authorized_user"`
		} `json:"connections"`
	}
	if err := s.NATS.Monitor("/connz?auth=true&acc="+account, &connz); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range connz.Conns {
		if c.Account == account && c.AuthorizedUser != "" {
			keys = append(keys, c.AuthorizedUser)
		}
	}
	return keys
}

// POST /revoke refuses the provisioner's own users: the SYS account's system
// user (revoking it would silently stop every later revocation) and the
// CONTROL account's control-admin user (enrolment would answer 503), with
// their live keys read off the monitoring page as an attacker would, and
// any other key of those accounts that is not a stored backend user. The
// positive controls revoke a tenant's sensor user and a backend user, and
// show the provisioner still revokes and enrols after the attempts.
func TestAttackRevokeTheProvisionersOwnUsers(t *testing.T) {
	s := acmeStack(t)
	victim := sensorUser(t, s, "acme", "s1")
	later := sensorUser(t, s, "acme", "s2")
	status, body := s.Post("/backend-user", map[string]string{"name": "backend"})
	be := decode[provisionerwire.BackendUserResponse](t, status, body, 200, 201)

	sysKeys := liveUserKeys(t, s, s.Operator.SystemAccount)
	ctlKeys := liveUserKeys(t, s, s.Operator.ControlAccount)
	if len(sysKeys) == 0 || len(ctlKeys) == 0 {
		t.Fatalf("monitoring page shows SYS users %v and CONTROL users %v; want the provisioner's own", sysKeys, ctlKeys)
	}
	sysSeed := func() []byte {
		_, store := storeOf(t, s)
		a, err := store.Account(context.Background(), s.Operator.SystemAccount)
		if err != nil {
			t.Fatal(err)
		}
		return a.Seed
	}()
	otherSys, _, err := jwtauthority.SystemUser(sysSeed)
	if err != nil {
		t.Fatal(err)
	}
	otherSysKey, err := jwt.DecodeUserClaims(otherSys)
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct{ name, account, user string }
	var attempts []attempt
	for _, k := range sysKeys {
		attempts = append(attempts, attempt{"live SYS user " + k, s.Operator.SystemAccount, k})
	}
	for _, k := range ctlKeys {
		if k != be.UserPubKey {
			attempts = append(attempts, attempt{"live CONTROL user " + k, s.Operator.ControlAccount, k})
		}
	}
	attempts = append(attempts,
		attempt{"another SYS key", s.Operator.SystemAccount, otherSysKey.Subject},
		attempt{"a tenant's sensor key named in the CONTROL account", s.Operator.ControlAccount, later.UserPubKey},
	)
	for _, a := range attempts {
		status, body := s.Post("/revoke", map[string]string{"accountId": a.account, "userPubKey": a.user})
		if status != 403 || !strings.Contains(string(body), `"user_not_revocable"`) {
			t.Errorf("revoke %s: %d %s; want 403 user_not_revocable", a.name, status, body)
		}
	}

	// Positive controls: a sensor is revoked and disconnected, a backend
	// user is revoked, and both still work after the refused attempts:
	// the SYS user pushes the revocation, the control admin creates the
	// consumer of a new sensor.
	vc, err := connectSensor(t, s, victim)
	if err != nil {
		t.Fatal(err)
	}
	status, body = s.Post("/revoke", map[string]string{"accountId": victim.AccountID, "userPubKey": victim.UserPubKey})
	decode[map[string]any](t, status, body, 200)
	vc.closedWithin(t, 5*time.Second, "revoked sensor still connected 5 s after POST /revoke: the SYS user no longer pushes")
	status, body = s.Post("/revoke", map[string]string{"accountId": be.AccountID, "userPubKey": be.UserPubKey})
	decode[map[string]any](t, status, body, 200)
	status, body = s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "s3"})
	fresh := decode[provisionerwire.UserResponse](t, status, body, 201)
	sensorConnects(t, s, fresh, "a sensor enrolled after the attempts cannot connect")
	if keys := liveUserKeys(t, s, s.Operator.SystemAccount); len(keys) == 0 {
		t.Fatal("the provisioner's SYS user is gone")
	}
}
