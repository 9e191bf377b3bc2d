package app_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

func userClaims(t *testing.T, creds []byte) *jwt.UserClaims {
	t.Helper()
	return provisionertest.UserClaims(t, creds)
}

func connectWith(url string, creds []byte) error {
	tok, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return err
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		return err
	}
	seed, _ := kp.Seed()
	nc, err := nats.Connect(url, nats.UserJWTAndSeed(tok, string(seed)), nats.MaxReconnects(0), nats.Timeout(10*time.Second))
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}

// commandsOf runs a sensor's NATS side as the agent does, counting its
// (re)connections; its result arrives on the returned channel.
func commandsOf(t *testing.T, ctx context.Context, st *sensorclient.State) (*sensorclient.Commands, *atomic.Int32, chan error) {
	t.Helper()
	var connects atomic.Int32
	c, err := sensorclient.NewCommands(sensorclient.CommandsConfig{
		TenantID: st.TenantID, SensorID: st.SensorID, NATS: *st.NATS, Creds: st.Creds,
		Backoff: sensorclient.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Handle:  func(context.Context, sensorclient.Command) {}, Connected: func() { connects.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(c.Close)
	return c, &connects, done
}

// Sensor NATS credentials expire (SENSOR_USER_JWT_TTL on the provisioner):
// nats-server refuses an expired user JWT and closes connections made with
// it; a certificate renewal hands out a JWT for the same user key with a
// later expiry, which a connection given it (SetCreds, as the agent does
// when it adopts a renewal) reconnects with, while one left on the old JWT
// is refused.
func TestSensorNATSCredentialsExpire(t *testing.T) {
	const ttl = 20 * time.Second
	p, e, ctx := renewalStart(t, ttl)
	issued := time.Now()
	st := p.enrolClient(ctx, e, "acme")
	first := userClaims(t, st.Creds)
	exp1 := time.Unix(first.Expires, 0)
	if first.Expires == 0 || exp1.Before(issued.Add(ttl-2*time.Second)) || exp1.After(time.Now().Add(ttl+time.Second)) {
		t.Fatalf("enrolment's user JWT expires at %v, want about %v from now", exp1, ttl)
	}

	adopting, adoptingConnects, adoptingDone := commandsOf(t, ctx, st)
	_, staleConnects, staleDone := commandsOf(t, ctx, st)
	waitUntil(t, ttl/2, "both connections up", func() bool { return adoptingConnects.Load() >= 1 && staleConnects.Load() >= 1 })

	// The provisioner now hands out JWTs valid an hour, so the renewed one
	// outlives the test however slow the machine.
	setSensorJWTTTL(p.prov, time.Hour)
	renewed, err := e.Renew(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	second := userClaims(t, renewed.Creds)
	if second.Subject != first.Subject {
		t.Fatalf("renewal changed the user key %s to %s; want the same user with a later expiry", first.Subject, second.Subject)
	}
	if second.Expires <= first.Expires {
		t.Fatalf("renewal's user JWT expires at %d, not after the enrolment's %d", second.Expires, first.Expires)
	}
	if time.Now().After(exp1) {
		t.Fatalf("the renewal came after the enrolment's JWT expired (%v): the machine is too slow for this test's %v", exp1, ttl)
	}
	if err := adopting.SetCreds(renewed.Creds); err != nil {
		t.Fatal(err)
	}

	for time.Now().Before(exp1.Add(1500 * time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	err = connectWith(st.NATS.URL, st.Creds)
	if err == nil {
		t.Fatal("nats-server accepted an expired user JWT")
	}
	if !errors.Is(err, nats.ErrAuthExpired) && !errors.Is(err, nats.ErrAuthorization) {
		t.Logf("refusal of the expired JWT: %v", err)
	}
	if err := connectWith(renewed.NATS.URL, renewed.Creds); err != nil {
		t.Fatalf("the renewed user JWT: %v", err)
	}
	select {
	case err := <-staleDone:
		if !errors.Is(err, sensorclient.ErrNATSRefused) {
			t.Fatalf("connection left on the expired JWT ended with %v, want ErrNATSRefused", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a connection left on the expired JWT was not refused")
	}
	waitUntil(t, 30*time.Second, "the adopting connection reconnected with the renewed JWT", func() bool { return adoptingConnects.Load() >= 2 })
	select {
	case err := <-adoptingDone:
		t.Fatalf("the connection given the renewed JWT ended: %v", err)
	default:
	}
}
