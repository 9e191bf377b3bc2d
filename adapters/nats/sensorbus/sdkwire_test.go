package sensorbus

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// sdkTestdata is where the agent SDK (its own module, sdk/) keeps the bytes
// it sends, written and checked by its own tests; reading them here holds
// both ends to one text.
var sdkTestdata = filepath.Join("..", "..", "..", "sdk", "sensorclient", "testdata")

// TestStatusFromTheSDKIsAccepted: the control plane decodes status strictly
// (sensorwire.DecodeStatus) and checks it (fleet.CheckStatusReport); what
// the SDK sends (sdk/sensorclient's TestStatusGolden) must pass,
// including long details and odd command ids.
func TestStatusFromTheSDKIsAccepted(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 8, 0, 0, 123456000, time.UTC)
	want := map[string]fleet.StatusReport{
		"heartbeat":                             {State: fleet.StateOnline, At: at},
		"command result":                        {State: fleet.StateRunning, CommandID: "0b6a3f0e-8c1d", At: at, AgentVersion: "v1.2.3"},
		"long detail is cut on a rune boundary": {State: fleet.StateError, At: at, Detail: strings.Repeat("é", 512)},
		"invalid command id is dropped":         {State: fleet.StateStopped, At: at},
	}
	data, err := os.ReadFile(filepath.Join(sdkTestdata, "status.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d status lines, want %d", len(lines), len(want))
	}
	for _, line := range lines {
		name, payload, _ := bytes.Cut(line, []byte("\t"))
		w, ok := want[string(name)]
		if !ok {
			t.Errorf("unknown case %q", name)
			continue
		}
		decoded, err := decodeStatus(payload)
		if err != nil {
			t.Errorf("%s: control plane cannot decode %s: %v", name, payload, err)
			continue
		}
		got, err := fleet.CheckStatusReport(decoded)
		if err != nil {
			t.Errorf("%s: control plane refuses %s: %v", name, payload, err)
			continue
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s: parsed status (-want +got):\n%s", name, diff)
		}
	}
}
