package sensorclient

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

func newOutbox(t *testing.T) (*StateDir, *Outbox, *testClock) {
	t.Helper()
	dir, err := OpenStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)}
	o, err := dir.OpenOutbox(clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return dir, o, clock
}

func result(id string, at time.Time) CommandResult {
	return CommandResult{CommandID: id, Outcome: OutcomeApplied, Detail: "ok", At: at}
}

func ids(results []CommandResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.CommandID
	}
	return out
}

// Every result stays until confirmed, across a restart (the file, mode
// 0600); reports carry them in turn, never-reported ones first; a
// confirmation is idempotent; a confirmed result is still recognised (no
// second application) until its command expires, then forgotten.
func TestOutboxKeepsEveryResultUntilConfirmed(t *testing.T) {
	t.Parallel()
	dir, o, clock := newOutbox(t)
	exp := clock.t.Add(10 * time.Minute)
	for i := range 20 {
		if added, lost, err := o.Add(result(fmt.Sprintf("c%02d", i), clock.t), exp); !added || lost != nil || err != nil {
			t.Fatalf("Add c%02d = %v %v %v", i, added, lost, err)
		}
	}
	if added, _, _ := o.Add(result("c00", clock.t), exp); added {
		t.Fatal("a second result for c00 was added")
	}
	if m := mode(t, filepath.Join(dir.path, ResultsFile)); m.Perm() != 0o600 {
		t.Fatalf("outbox file mode %04o, want 0600", m.Perm())
	}
	var seen []string
	for range 3 {
		clock.t = clock.t.Add(time.Second)
		seen = append(seen, ids(o.Due(MaxResults))...)
	}
	slices.Sort(seen)
	if len(seen) != 24 || len(slices.Compact(slices.Clone(seen))) != 20 {
		t.Fatalf("three reports carried %v: want all 20, the oldest 4 twice", seen)
	}

	// Restart: every result is still there, unconfirmed.
	o2, err := dir.OpenOutbox(clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if n := o2.Unconfirmed(); n != 20 {
		t.Fatalf("%d unconfirmed after reopening, want 20", n)
	}
	if got := ids(o2.Due(MaxResults)); !slices.Equal(got, []string{"c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07"}) {
		t.Fatalf("first report after reopening %v, want the oldest 8", got)
	}

	n, err := o2.Confirm([]string{"c00", "c01", "nope", "c01"})
	if n != 2 || err != nil {
		t.Fatalf("Confirm = %d, %v; want 2", n, err)
	}
	if n, _ := o2.Confirm([]string{"c00"}); n != 0 {
		t.Fatalf("repeated confirmation counted %d", n)
	}
	if !o2.Has("c00") || o2.Unconfirmed() != 18 {
		t.Fatalf("after confirming: has c00 %v, %d unconfirmed", o2.Has("c00"), o2.Unconfirmed())
	}
	for range 5 {
		if slices.Contains(ids(o2.Due(MaxResults)), "c00") {
			t.Fatal("a confirmed result is reported again")
		}
	}
	o3, _ := dir.OpenOutbox(clock.now)
	if !o3.Has("c01") || o3.Unconfirmed() != 18 {
		t.Fatalf("confirmation not kept across a restart: has c01 %v, %d unconfirmed", o3.Has("c01"), o3.Unconfirmed())
	}
	data, _ := os.ReadFile(filepath.Join(dir.path, ResultsFile))
	var onDisk []map[string]any
	_ = json.Unmarshal(data, &onDisk)
	if onDisk[0]["detail"] != nil || onDisk[0]["confirmedAt"] == nil {
		t.Errorf("confirmed entry on disk %v: want only its id, outcome and confirmation", onDisk[0])
	}

	// Past the command's expiry the confirmed ids are forgotten; the
	// unconfirmed ones stay.
	clock.t = exp.Add(expirySkew + time.Second)
	if _, err := o3.Confirm([]string{"c02"}); err != nil {
		t.Fatal(err)
	}
	if o3.Has("c00") || o3.Has("c02") || !o3.Has("c03") || o3.Unconfirmed() != 17 {
		t.Fatalf("after expiry: has c00 %v c02 %v c03 %v, %d unconfirmed", o3.Has("c00"), o3.Has("c02"), o3.Has("c03"), o3.Unconfirmed())
	}
}

// At the cap the oldest confirmed entry gives way first, then the oldest
// unconfirmed result, which Add reports lost; results older than
// MaxUnconfirmedAge are forgotten and reported lost too.
func TestOutboxBounds(t *testing.T) {
	t.Parallel()
	_, o, clock := newOutbox(t)
	exp := clock.t.Add(time.Hour)
	for i := range MaxOutbox {
		o.entries = append(o.entries, outboxEntry{CommandResult: result(fmt.Sprintf("c%d", i), clock.t), ExpiresAt: exp})
	}
	if _, err := o.Confirm([]string{"c7"}); err != nil {
		t.Fatal(err)
	}
	if _, lost, _ := o.Add(result("new1", clock.t), exp); len(lost) != 0 || o.Has("c7") || !o.Has("c0") {
		t.Fatalf("at the cap with a confirmed entry: lost %v, c7 kept %v", lost, o.Has("c7"))
	}
	if _, lost, _ := o.Add(result("new2", clock.t), exp); !slices.Equal(lost, []string{"c0"}) || o.Has("c0") || !o.Has("new2") {
		t.Fatalf("at the cap: lost %v, want c0", lost)
	}
	clock.t = clock.t.Add(MaxUnconfirmedAge + time.Second)
	_, lost, _ := o.Add(result("late", clock.t), time.Time{})
	if len(lost) != MaxOutbox || o.Unconfirmed() != 1 {
		t.Fatalf("after %s: %d lost, %d unconfirmed; want all but the new one lost", MaxUnconfirmedAge, len(lost), o.Unconfirmed())
	}
}

// The file an agent before the outbox wrote (a list of results) loads as
// unconfirmed results.
func TestOutboxReadsTheOldResultsFile(t *testing.T) {
	t.Parallel()
	dir, _, clock := newOutbox(t)
	old := []CommandResult{result("a1", clock.t), result("a2", clock.t), {CommandID: "bad id", At: clock.t}}
	data, _ := json.Marshal(old)
	if err := writeAtomic(filepath.Join(dir.path, ResultsFile), data); err != nil {
		t.Fatal(err)
	}
	o, err := dir.OpenOutbox(clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(o.Due(MaxResults)); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("old file loaded as %v", got)
	}
	if err := os.WriteFile(filepath.Join(dir.path, ResultsFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := dir.OpenOutbox(clock.now); err == nil || o == nil || o.Unconfirmed() != 0 {
		t.Fatalf("unreadable file: %v, %v; want an empty outbox and the error", o, err)
	}
}

// A confirmation is taken only for this sensor: another sensor of the
// tenant can point its own report's reply at this sensor's inbox, and the
// control plane then names the other sensor.
func TestConfirmationForAnotherSensorRefused(t *testing.T) {
	t.Parallel()
	good := `{"tenantId":"acme","sensorId":"s1","recorded":["c1"]}`
	if c, err := decodeConfirmation([]byte(good), "acme", "s1"); err != nil || !slices.Equal(c.Recorded, []string{"c1"}) {
		t.Fatalf("own confirmation: %+v, %v", c, err)
	}
	for _, bad := range []string{
		`{"tenantId":"acme","sensorId":"s2","recorded":["c1"]}`,
		`{"tenantId":"other","sensorId":"s1","recorded":["c1"]}`,
		`{"recorded":["c1"]}`,
		`not json`,
		`{"tenantId":"acme","sensorId":"s1","recorded":["` + strings.Repeat("x", maxConfirmationBytes) + `"]}`,
	} {
		if _, err := decodeConfirmation([]byte(bad), "acme", "s1"); err == nil {
			t.Errorf("confirmation %.80s accepted", bad)
		}
	}
}
