package sensorbus_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
	"github.com/rxc-project/rxc/core/fleet"
)

// freezer is a TCP proxy in front of nats-server that can stop moving
// bytes while keeping both sockets open: what a client sees of a server
// hung by SIGSTOP.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target, thaw: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); f.unfreeze() })
	go f.accept()
	return f
}

func (f *freezer) url() string { return "nats://" + f.ln.Addr().String() }

func (f *freezer) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		go f.pipe(c, s)
		go f.pipe(s, c)
	}
}

func (f *freezer) pipe(dst io.WriteCloser, src io.Reader) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen, thaw := f.frozen, f.thaw
		f.mu.Unlock()
		if frozen {
			<-thaw
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.frozen, f.thaw = true, make(chan struct{})
	}
}

func (f *freezer) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thaw)
	}
}

// TestHungServer: with the server hung (socket open, nothing answered) a
// command publication ends unconfirmed — never "not stored", because the
// server may still take it — and the round-trip check fails. Once the
// server moves again it stores the command, and publishing it again with
// the same id is acknowledged as a duplicate of that one.
func TestHungServer(t *testing.T) {
	t.Parallel()
	s1 := sensorT1("s1")
	w, url, admin := running(t, -1, s1)
	fr := newFreezer(t, strings.TrimPrefix(url, "nats://"))
	c := newClient(t, fr.url(), static(w.backendCreds()), func(cfg *sensorbus.Config) { cfg.PublishTimeout = time.Second })
	startReady(t, c)
	if err := c.Check(t.Context()); err != nil {
		t.Fatalf("Check before the hang: %v", err)
	}

	fr.freeze()
	_, err := c.PublishCommand(t.Context(), command(s1, "cmd-hung", fleet.ActionStop))
	if !errors.Is(err, fleet.ErrPublishUnknown) || errors.Is(err, fleet.ErrNotPublished) {
		t.Fatalf("publish to a hung server: %v, want ErrPublishUnknown (maybe stored)", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	err = c.Check(ctx)
	cancel()
	if err == nil {
		t.Fatal("Check passed while the server was hung")
	}

	fr.unfreeze()
	st, err := admin.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := st.Info(t.Context())
		if err == nil && info.State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command sent during the hang was not stored after it: %+v, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ack, err := c.PublishCommand(t.Context(), command(s1, "cmd-hung", fleet.ActionStop))
	if err != nil || !ack.Duplicate || ack.Sequence != 1 {
		t.Errorf("publishing it again: %+v, %v; want a duplicate of sequence 1", ack, err)
	}
	if err := c.Check(t.Context()); err != nil {
		t.Errorf("Check after the hang: %v", err)
	}
}
