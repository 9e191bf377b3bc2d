package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// A recreated consumer delivers again every command the stream keeps for
// the sensor (up to COMMAND_STREAM_MAX_PER_SENSOR, 64 by default), far more
// than the results file's MaxResults: the applied file recognises them,
// across a restart, until they expire; an expired one is forgotten.
func TestAppliedCommandsOutliveTheResults(t *testing.T) {
	dir, err := sensorclient.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{dir: dir, log: slog.New(slog.DiscardHandler)}
	now := time.Now()
	const n = 64
	for i := range n {
		a.markApplied(sensorclient.Command{CommandID: fmt.Sprintf("c-%02d", i), ExpiresAt: now.Add(10 * time.Minute)})
	}
	a.markApplied(sensorclient.Command{CommandID: "expired", ExpiresAt: now.Add(-time.Second)})
	if n <= sensorclient.MaxResults {
		t.Fatalf("the test needs more commands than MaxResults (%d)", sensorclient.MaxResults)
	}

	restarted := &Agent{dir: dir, log: slog.New(slog.DiscardHandler)}
	restarted.loadApplied()
	for i := range n {
		if id := fmt.Sprintf("c-%02d", i); !restarted.wasApplied(id) {
			t.Errorf("%s applied before the restart is not recognised", id)
		}
	}
	if !restarted.wasApplied("expired") {
		t.Error("the latest command is kept until the next one (its entry is written with it)")
	}
	restarted.markApplied(sensorclient.Command{CommandID: "next", ExpiresAt: now.Add(time.Minute)})
	if restarted.wasApplied("expired") {
		t.Error("an expired command is still kept after the next one was applied")
	}
	if restarted.wasApplied("never") {
		t.Error("a command never applied is recognised")
	}

	// The file is private and bounded.
	fi, err := os.Stat(filepath.Join(dir.Path(), sensorclient.AppliedFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %o, want 0600", sensorclient.AppliedFile, fi.Mode().Perm())
	}
	for i := range sensorclient.MaxApplied + 10 {
		restarted.markApplied(sensorclient.Command{CommandID: fmt.Sprintf("d-%03d", i), ExpiresAt: now.Add(time.Hour)})
	}
	list, err := dir.LoadApplied()
	if err != nil || len(list) != sensorclient.MaxApplied {
		t.Errorf("kept %d entries (%v), want MaxApplied %d", len(list), err, sensorclient.MaxApplied)
	}
	if restarted.wasApplied("d-000") || !restarted.wasApplied(fmt.Sprintf("d-%03d", sensorclient.MaxApplied+9)) {
		t.Error("the oldest beyond MaxApplied should go, the newest stay")
	}
}
