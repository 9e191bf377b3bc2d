package natstest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/internal/natstest"
)

// The server the tests get is the one asked for, and it keeps its port and
// JetStream store across a restart and a kill.
func TestServerRestartsOnItsPortAndStore(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Dir: t.TempDir()})
	v, err := s.Version()
	if err != nil {
		t.Fatal(err)
	}
	if natstest.External() {
		out, err := exec.Command(os.Getenv(natstest.BinEnv), "--version").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), v) {
			t.Fatalf("server reports %s, the binary says %s", v, out)
		}
	}
	t.Logf("nats-server %s (external %v)", v, natstest.External())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func() {
		nc, err := nats.Connect(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}, Storage: jetstream.FileStorage}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "keep", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(when string) {
		t.Helper()
		nc, err := nats.Connect(s.URL())
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		st, err := js.Stream(ctx, "KEEP")
		if err != nil {
			t.Fatalf("%s: stream lost: %v", when, err)
		}
		if n := st.CachedInfo().State.Msgs; n != 1 {
			t.Fatalf("%s: %d messages, want 1", when, n)
		}
	}
	create()
	s.Stop()
	if s.Running() || s.Reachable() {
		t.Fatal("server still up after Stop")
	}
	s.Start()
	kept("after a restart")
	s.Kill()
	if s.Reachable() {
		t.Fatal("server still up after Kill")
	}
	s.Start()
	kept("after a kill")
}

func TestTryStartReportsABadConfiguration(t *testing.T) {
	s := natstest.New(t, natstest.Options{Dir: t.TempDir(), Config: "no_such_option_block {", ReadyTimeout: 10 * time.Second})
	if err := s.TryStart(); err == nil {
		t.Fatal("a server with a broken configuration started")
	}
	if s.Running() {
		t.Fatal("Running after a failed start")
	}
}

// In operator mode the server trusts the operator's accounts and nothing
// else: a user of a preloaded account connects, a user of an account the
// resolver does not know and a client without credentials are refused. The
// same holds with the accounts behind a URL resolver.
func TestOperatorMode(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	sys, _ := nkeys.CreateAccount()
	spub, _ := sys.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	oc.SystemAccount = spub
	otok, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	account := func(kp nkeys.KeyPair, name string) string {
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		tok, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	user := func(acct nkeys.KeyPair) nats.Option {
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		tok, err := jwt.NewUserClaims(upub).Encode(acct)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := ukp.Seed()
		return nats.UserJWTAndSeed(tok, string(seed))
	}
	known, _ := nkeys.CreateAccount()
	kpub, _ := known.PublicKey()
	unknown, _ := nkeys.CreateAccount()
	jwts := map[string]string{spub: account(sys, "SYS"), kpub: account(known, "KNOWN")}

	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := jwts[strings.TrimPrefix(r.URL.Path, "/jwt/v1/accounts/")]
		if !ok {
			if r.URL.Path == "/jwt/v1/accounts/" {
				return // the server checks the base URL at start
			}
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(tok))
	}))
	t.Cleanup(rs.Close)

	for name, op := range map[string]*natstest.Operator{
		"memory resolver": {JWT: otok, SystemAccount: spub, Preload: jwts},
		"URL resolver":    {JWT: otok, SystemAccount: spub, ResolverURL: rs.URL + "/jwt/v1/accounts/"},
	} {
		t.Run(name, func(t *testing.T) {
			s := natstest.Start(t, natstest.Options{Dir: t.TempDir(), Operator: op})
			nc, err := nats.Connect(s.URL(), user(known), nats.MaxReconnects(0))
			if err != nil {
				t.Fatalf("positive control: a user of a trusted account: %v", err)
			}
			nc.Close()
			for what, opts := range map[string][]nats.Option{
				"a user of an unknown account": {user(unknown)},
				"a client without credentials": nil,
			} {
				if nc, err := nats.Connect(s.URL(), append(opts, nats.MaxReconnects(0))...); err == nil {
					nc.Close()
					t.Errorf("%s connected", what)
				}
			}
		})
	}
}

// With Profiling the server answers on its profiling port; without it
// there is none. An external server has its process id while it runs.
func TestProfilingPortAndPID(t *testing.T) {
	plain := natstest.Start(t, natstest.Options{Dir: t.TempDir(), Name: "plain"})
	if u := plain.ProfileURL(); u != "" {
		t.Errorf("a server without Profiling has profiling URL %q", u)
	}
	s := natstest.Start(t, natstest.Options{Dir: t.TempDir(), Name: "prof", Profiling: true})
	resp, err := http.Get(s.ProfileURL() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("profiling index: %s", resp.Status)
	}
	if s.External() != (s.PID() > 0) {
		t.Errorf("external %v, PID %d", s.External(), s.PID())
	}
	s.Stop()
	if s.PID() != 0 {
		t.Errorf("PID %d after Stop, want 0", s.PID())
	}
}

// StopWithin reports a stop within its limit, and kills a server that does
// not stop in time (a paused process ignores SIGTERM), as a supervisor
// with that grace period would; in process there is nothing to signal.
func TestStopWithin(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Dir: t.TempDir()})
	if !natstest.External() {
		if _, _, err := s.StopWithin(syscall.SIGTERM, time.Second); err == nil {
			t.Fatal("StopWithin signalled an in-process server")
		}
		if !s.Running() {
			t.Fatal("a refused StopWithin stopped the server")
		}
		return
	}
	took, exited, err := s.StopWithin(syscall.SIGTERM, 20*time.Second)
	if err != nil || !exited || s.Running() {
		t.Fatalf("SIGTERM: took %s, exited %v, err %v, running %v", took, exited, err, s.Running())
	}
	s.Start()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	took, exited, err = s.StopWithin(syscall.SIGTERM, time.Second)
	if err != nil || exited || took < time.Second || s.Running() {
		t.Fatalf("paused server: took %s, exited on its own %v, err %v, running %v; want killed after 1s", took, exited, err, s.Running())
	}
	if _, _, err := s.StopWithin(syscall.SIGTERM, time.Second); err == nil {
		t.Error("StopWithin signalled a stopped server")
	}
	s.Start()
	if !s.Reachable() {
		t.Error("the server does not start again after a kill")
	}
}
