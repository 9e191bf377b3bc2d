package sensorclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// update rewrites the golden files of the wire tests.
var update = flag.Bool("update", false, "rewrite testdata/ from what this package sends")

var testTime = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

const validCommand = `{"commandId":"0b6a3f0e-8c1d-4f62-9d0a-2f3b9c1e7a55","tenantId":"acme","sensorId":"s-1","action":"start",` +
	`"issuedAt":"2026-11-21T09:00:00Z","issuedBy":"ops@example.com","expiresAt":"2026-11-21T09:10:00Z"}`

func TestDecodeCommand(t *testing.T) {
	t.Parallel()
	want := Command{
		CommandID: "0b6a3f0e-8c1d-4f62-9d0a-2f3b9c1e7a55", TenantID: "acme", SensorID: "s-1", Action: ActionStart,
		IssuedAt: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), IssuedBy: "ops@example.com",
		ExpiresAt: time.Date(2026, 11, 21, 9, 10, 0, 0, time.UTC),
	}
	mutate := func(f func(m map[string]any)) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(validCommand), &m)
		f(m)
		out, _ := json.Marshal(m)
		return string(out)
	}
	tests := []struct {
		name    string
		payload string
		want    Command
		wantErr error
	}{
		{"valid start", validCommand, want, nil},
		{"unknown fields are ignored", mutate(func(m map[string]any) { m["priority"] = "high" }), want, nil},
		{"stop", mutate(func(m map[string]any) { m["action"] = "stop" }), func() Command { c := want; c.Action = ActionStop; return c }(), nil},
		{"unsupported action", mutate(func(m map[string]any) { m["action"] = "reboot" }), func() Command { c := want; c.Action = "reboot"; return c }(), ErrUnsupportedAction},
		{"not JSON", "start now", Command{}, ErrMalformedCommand},
		{"empty", "", Command{}, ErrMalformedCommand},
		{"JSON array", "[]", Command{}, ErrMalformedCommand},
		{"trailing data", validCommand + `{}`, Command{}, ErrMalformedCommand},
		{"missing commandId", mutate(func(m map[string]any) { delete(m, "commandId") }), Command{}, ErrMalformedCommand},
		{"commandId outside the id grammar", mutate(func(m map[string]any) { m["commandId"] = "a.b>" }), Command{}, ErrMalformedCommand},
		// A malformed command keeps its id when it has one, so the refusal
		// names it.
		{"missing sensorId", mutate(func(m map[string]any) { delete(m, "sensorId") }), Command{CommandID: want.CommandID}, ErrMalformedCommand},
		{"missing expiresAt", mutate(func(m map[string]any) { delete(m, "expiresAt") }), Command{CommandID: want.CommandID}, ErrMalformedCommand},
		{"bad time", mutate(func(m map[string]any) { m["issuedAt"] = "yesterday" }), Command{}, ErrMalformedCommand},
		{"oversized", `{"pad":"` + strings.Repeat("x", MaxCommandBytes) + `"}`, Command{}, ErrMalformedCommand},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeCommand([]byte(tc.payload))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandExpired(t *testing.T) {
	t.Parallel()
	c, err := DecodeCommand([]byte(validCommand))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{c.IssuedAt, false},
		{c.ExpiresAt.Add(-time.Nanosecond), false},
		{c.ExpiresAt, true},
		{c.ExpiresAt.Add(time.Hour), true},
	} {
		if got := c.Expired(tc.now); got != tc.want {
			t.Errorf("Expired(%s) = %v, want %v", tc.now.Format(time.RFC3339Nano), got, tc.want)
		}
	}
}

// statusGolden are the status reports held in testdata/status.jsonl, one
// "name<TAB>JSON" line each. The control plane parses status strictly; its
// parser reads the same file (adapters/nats/sensorbus's TestStatusFromTheSDKIsAccepted),
// so the two ends are held to one text without this module linking the
// control plane.
var statusGolden = []struct {
	name string
	in   Status
}{
	{"heartbeat", Status{State: StateOnline, At: goldenTime}},
	{"command result", Status{State: StateRunning, CommandID: "0b6a3f0e-8c1d", At: goldenTime, AgentVersion: "v1.2.3"}},
	{"long detail is cut on a rune boundary", Status{State: StateError, At: goldenTime, Detail: strings.Repeat("é", 3000)}},
	{"invalid command id is dropped", Status{State: StateStopped, CommandID: "x.y", At: goldenTime}},
}

var goldenTime = time.Date(2026, 11, 21, 9, 0, 0, 123456000, time.FixedZone("CET", 3600))

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: the control plane's test reads it; run go test -run %s -update and check adapters/nats/sensorbus's test\ngot:  %s\nwant: %s", path, t.Name(), got, want)
	}
}

func TestStatusGolden(t *testing.T) {
	var out bytes.Buffer
	for _, tc := range statusGolden {
		data, err := encodeStatus(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if strings.Contains(tc.name, "cut") && !strings.Contains(string(data), strings.Repeat("é", maxDetail/2)+`"`) {
			t.Errorf("%s: detail not cut to %d bytes on a rune boundary: %s", tc.name, maxDetail, data)
		}
		if strings.Contains(tc.name, "dropped") && strings.Contains(string(data), "x.y") {
			t.Errorf("%s: the invalid command id was sent: %s", tc.name, data)
		}
		// What the control plane's NATS adapter decodes it with.
		if _, err := sensorwire.DecodeStatus(data); err != nil {
			t.Errorf("%s: sensorwire.DecodeStatus refuses %s: %v", tc.name, data, err)
		}
		fmt.Fprintf(&out, "%s\t%s\n", tc.name, data)
	}
	golden(t, "status.jsonl", out.Bytes())
	if _, err := encodeStatus(Status{State: StateOnline}); err == nil {
		t.Error("a status without at was encoded")
	}
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(validCommand))
	f.Add([]byte(`{"commandId":"x"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil && !errors.Is(err, ErrMalformedCommand) && !errors.Is(err, ErrUnsupportedAction) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if err == nil && (!c.Action.Valid() || !idPattern.MatchString(c.CommandID) || c.ExpiresAt.IsZero()) {
			t.Fatalf("accepted an incomplete command %+v", c)
		}
	})
}

func TestStatusResults(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	var results []CommandResult
	for i := range 12 {
		results = append(results, CommandResult{CommandID: fmt.Sprintf("c%02d", i), Outcome: OutcomeRefused, Reason: "expired", Detail: strings.Repeat("d", 400), At: at})
	}
	results = append(results, CommandResult{CommandID: "a.b>", Outcome: OutcomeApplied, At: at})
	data, err := encodeStatus(Status{State: StateRunning, At: at, Detail: strings.Repeat("x", 2000), Results: results})
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 4<<10 {
		t.Errorf("status of %d bytes, over the control plane's 4 KiB", len(data))
	}
	var got Status
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	n := len(got.Results)
	if n == 0 || n > MaxResults || got.Results[n-1].CommandID != "c11" || len(got.Results[0].Detail) > maxResultDetail {
		t.Errorf("results %+v: want the newest (c11 last), at most %d, details cut", got.Results, MaxResults)
	}
	for _, r := range got.Results {
		if r.CommandID == "a.b>" {
			t.Error("a result with an id outside the grammar was sent")
		}
	}
}

func TestRefusalReason(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", ErrExpiredCommand):    "expired",
		fmt.Errorf("x: %w", ErrUnsupportedAction): "unknown_action",
		fmt.Errorf("x: %w", ErrForeignCommand):    "foreign",
		fmt.Errorf("x: %w", ErrMalformedCommand):  "malformed",
	} {
		if got := RefusalReason(err); got != want {
			t.Errorf("RefusalReason(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestRenewalMessageGolden: the agent signs exactly what the control plane
// verifies; core/fleet's TestRenewalMessageOfTheSDK reads the same file.
func TestRenewalMessageGolden(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	golden(t, "renewal-message.txt", RenewalMessage("s-1", csr, at))
}

// TestEnrolmentMessageGolden: the agent signs exactly what the control
// plane verifies; core/fleet's TestEnrolmentMessageOfTheSDK reads the same
// file.
func TestEnrolmentMessageGolden(t *testing.T) {
	at := time.Date(2026, 11, 21, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	golden(t, "enrolment-message.txt", EnrolmentMessage("s-1", csr, at))
}
