package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/waitfor"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

func TestParseRunFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    func(f *runFlags)
		wantErr string
	}{
		{name: "defaults", want: func(f *runFlags) {}},
		{name: "claim code from the environment", env: map[string]string{"RXC_CLAIM_CODE": "ENV-CODE"},
			want: func(f *runFlags) { f.claimCode = "ENV-CODE" }},
		{name: "the flag wins over the environment", args: []string{"--claim-code", "FLAG-CODE"}, env: map[string]string{"RXC_CLAIM_CODE": "ENV-CODE"},
			want: func(f *runFlags) { f.claimCode = "FLAG-CODE" }},
		{name: "API and state directory from the environment", env: map[string]string{"RXC_API_BASE_URL": "https://rxc.example.com", "RXC_STATE_DIR": "/var/lib/rxc-sensor"},
			want: func(f *runFlags) { f.api, f.stateDir = "https://rxc.example.com", "/var/lib/rxc-sensor" }},
		{name: "many sensors ignore RXC_CLAIM_CODE", args: []string{"--count", "3", "--claim-codes-file", "codes.txt"}, env: map[string]string{"RXC_CLAIM_CODE": "ENV-CODE"},
			want: func(f *runFlags) { f.count, f.claimCodesFile = 3, "codes.txt" }},
		{name: "one sensor from a codes file", args: []string{"--count", "1", "--claim-codes-file", "codes.txt"},
			want: func(f *runFlags) { f.claimCodesFile = "codes.txt" }},
		{name: "tuning", args: []string{"--heartbeat", "5s", "--events-per-minute", "120", "--simulate-failure-after", "1m", "--event-batch-interval", "2s", "--grpc-idle-timeout", "500ms"},
			want: func(f *runFlags) {
				f.heartbeat, f.eventsPerMinute, f.failAfter, f.batchInterval, f.grpcIdle = 5*time.Second, 120, time.Minute, 2*time.Second, 500*time.Millisecond
			}},
		{name: "connection kept open", args: []string{"--grpc-idle-timeout", "0"}, want: func(f *runFlags) { f.grpcIdle = 0 }},
		{name: "labels, repeatable", args: []string{"--label", "site=ams", "--label", "role=edge", "--label", "rack="},
			want: func(f *runFlags) { f.labels = labelFlag{"site": "ams", "role": "edge", "rack": ""} }},
		{name: "label without a value", args: []string{"--label", "site"}, wantErr: "key=value"},
		{name: "label given twice", args: []string{"--label", "site=a", "--label", "site=b"}, wantErr: "twice"},
		{name: "negative idle timeout", args: []string{"--grpc-idle-timeout", "-1s"}, wantErr: "--grpc-idle-timeout"},
		{name: "zero sensors", args: []string{"--count", "0"}, wantErr: "--count"},
		{name: "many sensors with one code", args: []string{"--count", "2", "--claim-code", "X"}, wantErr: "--claim-codes-file"},
		{name: "code and codes file", args: []string{"--claim-code", "X", "--claim-codes-file", "f"}, wantErr: "either"},
		{name: "heartbeat too short", args: []string{"--heartbeat", "100ms"}, wantErr: "--heartbeat"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "not defined"},
	}
	host, _ := os.Hostname()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"RXC_CLAIM_CODE", "RXC_API_BASE_URL", "RXC_STATE_DIR", "RXC_SENSOR_HOSTNAME", "RXC_LOG_LEVEL"} {
				t.Setenv(k, tc.env[k])
			}
			got, err := parseRunFlags(tc.args, &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := runFlags{api: "http://localhost:5009", stateDir: "rxc-sensor", hostname: host, heartbeat: 15 * time.Second,
				count: 1, eventsPerMinute: 30, batchInterval: sensorclient.DefaultBatchInterval, grpcIdle: sensorclient.DefaultIdleTimeout, logLevel: "info"}
			tc.want(&want)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(runFlags{})); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadClaimCodes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(path, []byte("# demo\nAAAA-1111\n\n  BBBB-2222  \r\n#CCCC\nDDDD-3333"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readClaimCodes(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"AAAA-1111", "BBBB-2222", "DDDD-3333"}, got); diff != "" {
		t.Errorf("codes (-want +got):\n%s", diff)
	}
	if _, err := readClaimCodes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing codes file was accepted")
	}
}

func TestRunWithoutStateOrClaimCodeExplains(t *testing.T) {
	t.Setenv("RXC_CLAIM_CODE", "")
	var stderr bytes.Buffer
	code := Run(context.Background(), []string{"run", "--api", "http://127.0.0.1:1", "--state-dir", filepath.Join(t.TempDir(), "s")}, &bytes.Buffer{}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--claim-code") {
		t.Fatalf("exit %d, stderr %q; want 1 and a hint about --claim-code", code, stderr.String())
	}
	var stdout bytes.Buffer
	if code := Run(context.Background(), []string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "sensor-agent ") {
		t.Fatalf("version: exit %d, %q", code, stdout.String())
	}
	if code := Run(context.Background(), []string{"frobnicate"}, &stdout, &stderr); code != 2 {
		t.Fatalf("unknown command: exit %d, want 2", code)
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	waitfor.Until(t, limit, what, ok)
}

func TestSimulatedRunnerEmitsPlausibleAlertsWhileRunning(t *testing.T) {
	t.Parallel()
	events := make(chan *sensorpb.SensorEvent, 100)
	r, err := NewSimulated(SimulatedConfig{SensorID: "s-1", EventsPerMinute: 6000, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.State().Phase; got != PhaseIdle {
		t.Fatalf("new runner phase %s, want idle", got)
	}
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if got := r.State().Phase; got != PhaseRunning {
		t.Fatalf("phase %s after Start, want running", got)
	}
	ids := map[string]bool{}
	for len(ids) < 5 {
		select {
		case ev := <-events:
			checkEvent(t, ev)
			ids[ev.GetEventId()] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d events in 5s at 100 per second", len(ids))
		}
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.State().Phase; got != PhaseStopped {
		t.Fatalf("phase %s after Stop, want stopped", got)
	}
	// Stop returns once the engine's goroutine is gone: nothing can follow
	// what is queued now.
	for len(events) > 0 {
		<-events
	}
	select {
	case ev := <-events:
		t.Fatalf("event %s after Stop", ev.GetEventId())
	default:
	}
}

func checkEvent(t *testing.T, ev *sensorpb.SensorEvent) {
	t.Helper()
	if id := ev.GetEventId(); id == "" || len(id) > 128 || !strings.HasPrefix(id, "s-1-") {
		t.Errorf("event id %q", id)
	}
	if ev.GetKind() != "alert" || ev.GetAlert().GetSignature() == "" || ev.GetAlert().GetSignatureId() == 0 || ev.GetTime() == nil {
		t.Errorf("event %v lacks alert fields", ev)
	}
	for _, a := range []string{ev.GetSrcIp(), ev.GetDestIp()} {
		if _, err := netip.ParseAddr(a); err != nil {
			t.Errorf("address %q: %v", a, err)
		}
	}
	if ev.GetSrcPort() == 0 || ev.GetSrcPort() > 65535 || ev.GetDestPort() == 0 || ev.GetDestPort() > 65535 {
		t.Errorf("ports %d → %d", ev.GetSrcPort(), ev.GetDestPort())
	}
	var raw struct {
		EventType string `json:"event_type"`
		SrcIP     string `json:"src_ip"`
		Alert     struct {
			Signature string `json:"signature"`
		} `json:"alert"`
	}
	if err := json.Unmarshal(ev.GetRawJson(), &raw); err != nil || raw.EventType != "alert" || raw.SrcIP != ev.GetSrcIp() || raw.Alert.Signature != ev.GetAlert().GetSignature() {
		t.Errorf("raw_json %s does not match the event (%v)", ev.GetRawJson(), err)
	}
}

func TestSimulatedRunnerFailure(t *testing.T) {
	t.Parallel()
	r, err := NewSimulated(SimulatedConfig{SensorID: "s-1", FailAfter: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the simulated failure", func() bool { return r.State().Phase == PhaseFailed })
	if r.State().Detail == "" {
		t.Error("failure without detail")
	}
	if err := r.Start(context.Background()); err != nil || r.State().Phase != PhaseRunning {
		t.Fatalf("restart after failure: %v, phase %s", err, r.State().Phase)
	}
	_ = r.Stop(context.Background())
	if _, err := NewSimulated(SimulatedConfig{EventsPerMinute: 10}); err == nil {
		t.Error("events without a channel accepted")
	}
}

// fakeRunner is a capture engine whose behaviour the test sets.
type fakeRunner struct {
	mu       sync.Mutex
	state    RunnerState
	startErr error
}

func (f *fakeRunner) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		f.state = RunnerState{Phase: PhaseFailed, Detail: f.startErr.Error()}
		return f.startErr
	}
	f.state = RunnerState{Phase: PhaseRunning}
	return nil
}

func (f *fakeRunner) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = RunnerState{Phase: PhaseStopped}
	return nil
}

func (f *fakeRunner) State() RunnerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeRunner) set(s RunnerState) {
	f.mu.Lock()
	f.state = s
	f.mu.Unlock()
}

func TestAgentStateMachine(t *testing.T) {
	t.Parallel()
	runner := &fakeRunner{state: RunnerState{Phase: PhaseIdle}}
	dir := filepath.Join(t.TempDir(), "state")
	a, err := NewAgent(AgentConfig{
		API: "http://127.0.0.1:1", StateDir: dir, Heartbeat: time.Second,
		NewRunner: func(string, chan<- *sensorpb.SensorEvent) (Runner, error) { return runner, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	a.st = &sensorclient.State{SensorID: "s-1", TenantID: "acme", SensorToken: "t", KeyPEM: []byte("k"), CertPEM: []byte("c"), CAPEM: []byte("ca")}
	a.runner = runner
	a.last = runner.State()
	ctx := context.Background()
	expect := func(step string, wantState sensorclient.ReportedState, wantDetail string) {
		t.Helper()
		state, detail := a.reported()
		if state != wantState || !strings.Contains(detail, wantDetail) || (wantDetail == "" && detail != "") {
			t.Errorf("%s: reported %s %q, want %s %q", step, state, detail, wantState, wantDetail)
		}
	}
	expect("after enrolment", sensorclient.StateOnline, "")

	a.apply(ctx, sensorclient.Command{CommandID: "c1", Action: sensorclient.ActionStart})
	expect("after start", sensorclient.StateRunning, "")
	saved, err := a.dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if saved.Desired != sensorclient.StateRunning {
		t.Errorf("desired state on disk %q, want running", saved.Desired)
	}

	runner.set(RunnerState{Phase: PhaseFailed, Detail: "capture died: eth1 went away"})
	if !a.observe() {
		t.Fatal("a runner failure was not seen as a change")
	}
	expect("after a runner failure", sensorclient.StateError, "eth1 went away")
	if a.observe() {
		t.Error("an unchanged runner state counted as a change")
	}

	a.apply(ctx, sensorclient.Command{CommandID: "c2", Action: sensorclient.ActionStop})
	expect("after stop", sensorclient.StateStopped, "")

	runner.startErr = errors.New("no capture interface")
	a.apply(ctx, sensorclient.Command{CommandID: "c3", Action: sensorclient.ActionStart})
	expect("after a failed start", sensorclient.StateError, "start failed: no capture interface")

	runner.startErr = nil
	a.apply(ctx, sensorclient.Command{CommandID: "c4", Action: sensorclient.ActionStart})
	expect("after a successful retry", sensorclient.StateRunning, "")
}

func TestInterruptDuringEnrolmentExitsCleanly(t *testing.T) {
	t.Setenv("RXC_CLAIM_CODE", "")
	// Nothing listens on port 1: the agent keeps retrying the redemption
	// until it is interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- Run(ctx, []string{"run", "--api", "http://127.0.0.1:1", "--claim-code", "ZQ7X-SECRET-9K2M", "--state-dir", filepath.Join(t.TempDir(), "s")}, &bytes.Buffer{}, &stderr)
	}()
	waitFor(t, 10*time.Second, "a failed redemption attempt", func() bool { return strings.Contains(stderr.String(), "redeem claim code failed") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after an interrupt during enrolment, want 0: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop within 10s of the interrupt")
	}
	if strings.Contains(stderr.String(), "ZQ7X-SECRET-9K2M") {
		t.Error("the claim code appeared in the log")
	}
}

type syncBuffer = logbuf.Buffer

// `run -h` prints the flags, each naming its environment variable, on
// standard output and exits 0 without enrolling anything.
func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"run", "--help"}, {"run", "--count", "2", "-help"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		for _, want := range []string{"usage: sensor-agent run", "-api", "RXC_API_BASE_URL", "RXC_STATE_DIR", "RXC_CLAIM_CODE", "RXC_LOG_LEVEL", "-grpc-idle-timeout"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("%v: help lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, &out, &errb); code != 0 || !strings.Contains(out.String(), "run -h") {
			t.Fatalf("%v: exit %d, %q", args, code, out.String())
		}
	}
}
