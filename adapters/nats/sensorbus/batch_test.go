package sensorbus_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/nats/sensorbus"
	"github.com/rxc-project/rxc/core/fleet"
)

func commandsFor(n int, prefix string) []fleet.Command {
	msgs := make([]fleet.Command, n)
	for i := range msgs {
		s := sensorT1(fmt.Sprintf("s%d", i%7))
		msgs[i] = command(s, fmt.Sprintf("%s-%d", prefix, i), fleet.ActionStart)
	}
	return msgs
}

// TestPublishCommandsPipelined: many commands published with a small
// window each get their own outcome in order: stored once under their
// message id (a repeat of an id already stored is acknowledged as a
// duplicate of it), a malformed one refused as bad input without being
// called unsent, and the stream holds each command once.
func TestPublishCommandsPipelined(t *testing.T) {
	t.Parallel()
	w, url, admin := running(t, -1)
	c := newClient(t, url, static(w.backendCreds()))
	startReady(t, c)
	ctx := t.Context()

	first, err := c.PublishCommand(ctx, command(sensorT1("s0"), "cmd-0", fleet.ActionStart))
	if err != nil {
		t.Fatal(err)
	}
	msgs := commandsFor(300, "cmd") // cmd-0 again, then 299 new ones
	msgs = append(msgs, fleet.Command{TenantID: "t1", SensorID: "s1.status", ID: "cmd-bad"})
	got := c.PublishCommands(ctx, msgs, 16)
	if len(got) != len(msgs) {
		t.Fatalf("%d outcomes for %d commands", len(got), len(msgs))
	}
	if r := got[0]; r.Err != nil || !r.Ack.Duplicate || r.Ack.Sequence != first.Sequence {
		t.Errorf("repeat of a stored id: %+v, want a duplicate of sequence %d", r, first.Sequence)
	}
	seqs := map[uint64]bool{first.Sequence: true}
	for i, r := range got[1:300] {
		if r.Err != nil || r.Ack.Duplicate || seqs[r.Ack.Sequence] {
			t.Fatalf("command %d: %+v", i+1, r)
		}
		seqs[r.Ack.Sequence] = true
	}
	if r := got[300]; !errors.Is(r.Err, fleet.ErrInvalidInput) || errors.Is(r.Err, fleet.ErrNotPublished) {
		t.Errorf("malformed subject: %v, want ErrInvalidInput only", r.Err)
	}
	st, err := admin.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 300 {
		t.Errorf("stream holds %d messages, want 300", n)
	}
	// Each message carries its own id.
	for _, seq := range []uint64{2, 150, 300} {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if id := raw.Header.Get(jetstream.MsgIDHeader); id != fmt.Sprintf("cmd-%d", seq-1) {
			t.Errorf("message %d has Nats-Msg-Id %q", seq, id)
		}
	}
	if n := c.Stats().Published; n != 301 {
		t.Errorf("Stats().Published = %d, want 301", n)
	}
}

// TestPublishCommandsNotStoredAreSaidSo: a stream that refuses (the
// client expects another stream) and a client that is not connected both
// answer ErrNotPublished for every command, and nothing is stored.
func TestPublishCommandsNotStoredAreSaidSo(t *testing.T) {
	t.Parallel()
	w, url, admin := running(t, -1)
	wrong := newClient(t, url, static(w.backendCreds()), func(cfg *sensorbus.Config) { cfg.Stream = "OTHER" })
	startReady(t, wrong)
	for i, r := range wrong.PublishCommands(t.Context(), commandsFor(20, "refused"), 8) {
		if !errors.Is(r.Err, fleet.ErrNotPublished) || !errors.Is(r.Err, fleet.ErrMessagingUnavailable) {
			t.Errorf("command %d to a stream that is not the expected one: %+v, want ErrNotPublished", i, r)
		}
	}
	never := newClient(t, url, static(w.backendCreds())) // never started
	start := time.Now()
	for i, r := range never.PublishCommands(t.Context(), commandsFor(20, "unsent"), 8) {
		if !errors.Is(r.Err, fleet.ErrNotPublished) {
			t.Errorf("command %d while not connected: %+v, want ErrNotPublished", i, r)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("not connected: answered after %v instead of at once", d)
	}
	st, err := admin.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("stream holds %d messages, want none", n)
	}
}

// TestPublishCommandsToAHungServer: commands sent to a hung server end
// unconfirmed — never "not stored" — within the publish timeout; once it
// moves again it stores them, and publishing them again is acknowledged
// as duplicates, nothing stored twice.
func TestPublishCommandsToAHungServer(t *testing.T) {
	t.Parallel()
	w, url, admin := running(t, -1)
	fr := newFreezer(t, strings.TrimPrefix(url, "nats://"))
	c := newClient(t, fr.url(), static(w.backendCreds()), func(cfg *sensorbus.Config) { cfg.PublishTimeout = time.Second })
	startReady(t, c)

	msgs := commandsFor(10, "hung")
	fr.freeze()
	start := time.Now()
	for i, r := range c.PublishCommands(t.Context(), msgs, 4) {
		if !errors.Is(r.Err, fleet.ErrPublishUnknown) || errors.Is(r.Err, fleet.ErrNotPublished) {
			t.Errorf("command %d to a hung server: %+v, want ErrPublishUnknown (maybe stored)", i, r)
		}
	}
	// Three windows of one-second timeouts, with room for a loaded machine.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("answered after %v", d)
	}
	fr.unfreeze()
	st, err := admin.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var stored uint64
	waitFor(t, 30*time.Second, "commands sent during the hang stored", func() bool {
		info, err := st.Info(t.Context())
		if err == nil {
			stored = info.State.Msgs
		}
		return stored == 10
	})
	// Published again (as the reconciliation does), each is a duplicate.
	waitFor(t, 30*time.Second, "client ready after the hang", c.Ready)
	for i, r := range c.PublishCommands(t.Context(), msgs, 4) {
		if r.Err != nil || !r.Ack.Duplicate {
			t.Errorf("command %d again: %+v, want a duplicate", i, r)
		}
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 10 {
		t.Errorf("stream holds %d messages after publishing the 10 again, want 10", info.State.Msgs)
	}
}
