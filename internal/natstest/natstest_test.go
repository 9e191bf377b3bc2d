package natstest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
