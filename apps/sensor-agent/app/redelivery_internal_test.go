package app

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// A recreated consumer (its node was lost) delivers again every command the
// stream keeps for the sensor (up to COMMAND_STREAM_MAX_PER_SENSOR, 64 by
// default), far more than one report's MaxResults: the outbox recognises
// each, confirmed by the control plane or not, across a restart, so none is
// applied twice; a command never applied is not taken for one.
func TestRedeliveredCommandsRecognisedAcrossARestart(t *testing.T) {
	dir, err := sensorclient.OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outbox, err := dir.OpenOutbox(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{dir: dir, log: slog.New(slog.DiscardHandler), outbox: outbox}
	const n = 64
	if n <= sensorclient.MaxResults {
		t.Fatalf("the test needs more commands than MaxResults (%d)", sensorclient.MaxResults)
	}
	now := time.Now().UTC()
	var confirmed []string
	for i := range n {
		id := fmt.Sprintf("c-%02d", i)
		a.remember(sensorclient.CommandResult{CommandID: id, Outcome: sensorclient.OutcomeApplied, At: now}, now.Add(10*time.Minute))
		if i%2 == 0 {
			confirmed = append(confirmed, id)
		}
	}
	a.confirmed(sensorclient.Confirmation{Recorded: confirmed})

	reopened, err := dir.OpenOutbox(nil)
	if err != nil {
		t.Fatal(err)
	}
	restarted := &Agent{dir: dir, log: slog.New(slog.DiscardHandler), outbox: reopened}
	for i := range n {
		if id := fmt.Sprintf("c-%02d", i); !restarted.known(id) {
			t.Errorf("%s applied before the restart is not recognised", id)
		}
	}
	if restarted.known("never") {
		t.Error("a command never applied is recognised")
	}
	if got := reopened.Unconfirmed(); got != n/2 {
		t.Errorf("%d results wait for the control plane after the restart, want %d", got, n/2)
	}
}
