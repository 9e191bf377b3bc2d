package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTransition(t *testing.T) {
	t.Parallel()
	all := []State{StatePending, StateOnline, StateRunning, StateStopped, StateError, StateOffline, StateRevoked}
	reportable := []State{StateOnline, StateRunning, StateStopped, StateError}
	type result struct {
		To State
		OK bool
	}
	tests := []struct {
		name     string
		from     State
		reported State
		want     result
	}{
		{"revoked is terminal", StateRevoked, StateRunning, result{StateRevoked, false}},
		{"pending reports online", StatePending, StateOnline, result{StateOnline, true}},
		{"offline comes back running", StateOffline, StateRunning, result{StateRunning, true}},
		{"running stops", StateRunning, StateStopped, result{StateStopped, true}},
		{"stopped fails", StateStopped, StateError, result{StateError, true}},
		{"error recovers", StateError, StateRunning, result{StateRunning, true}},
		{"same state again", StateRunning, StateRunning, result{StateRunning, true}},
		{"cannot report revoked", StateRunning, StateRevoked, result{StateRunning, false}},
		{"cannot report offline", StateRunning, StateOffline, result{StateRunning, false}},
		{"cannot report pending", StateOnline, StatePending, result{StateOnline, false}},
		{"unknown reported", StateOnline, "exploded", result{StateOnline, false}},
		{"unknown current", "weird", StateOnline, result{"weird", false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			to, ok := Transition(tt.from, tt.reported)
			if diff := cmp.Diff(tt.want, result{to, ok}); diff != "" {
				t.Errorf("Transition(%s, %s) mismatch (-want +got):\n%s", tt.from, tt.reported, diff)
			}
		})
	}
	// The whole table: every known state but revoked moves to any reportable state.
	for _, from := range all {
		for _, rep := range reportable {
			to, ok := Transition(from, rep)
			want := from != StateRevoked
			if ok != want || ok && to != rep {
				t.Errorf("Transition(%s, %s) = %s, %v", from, rep, to, ok)
			}
		}
	}
}

func TestParseStatusReport(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name    string
		payload string
		want    StatusReport
		wantErr bool
	}{
		{
			name:    "full",
			payload: `{"state":"running","commandId":"c1","at":"2026-03-01T12:00:00.123456789Z","detail":"ok","agentVersion":"1.2.3"}`,
			want:    StatusReport{State: StateRunning, CommandID: "c1", At: at.Truncate(time.Microsecond), Detail: "ok", AgentVersion: "1.2.3"},
		},
		{
			name:    "minimal, other zone",
			payload: `{"state":"online","at":"2026-03-01T14:00:00+02:00"}`,
			want:    StatusReport{State: StateOnline, At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		},
		{name: "unknown field", payload: `{"state":"online","at":"2026-03-01T12:00:00Z","sensorId":"x"}`, wantErr: true},
		{name: "missing at", payload: `{"state":"online"}`, wantErr: true},
		{name: "missing state", payload: `{"at":"2026-03-01T12:00:00Z"}`, wantErr: true},
		{name: "revoked not reportable", payload: `{"state":"revoked","at":"2026-03-01T12:00:00Z"}`, wantErr: true},
		{name: "offline not reportable", payload: `{"state":"offline","at":"2026-03-01T12:00:00Z"}`, wantErr: true},
		{name: "trailing object", payload: `{"state":"online","at":"2026-03-01T12:00:00Z"}{}`, wantErr: true},
		{name: "trailing garbage", payload: `{"state":"online","at":"2026-03-01T12:00:00Z"} x`, wantErr: true},
		{name: "not an object", payload: `["online"]`, wantErr: true},
		{name: "bad time", payload: `{"state":"online","at":"yesterday"}`, wantErr: true},
		{name: "long command id", payload: `{"state":"online","at":"2026-03-01T12:00:00Z","commandId":"` + strings.Repeat("c", 65) + `"}`, wantErr: true},
		{name: "command id with NUL", payload: `{"state":"online","at":"2026-03-01T12:00:00Z","commandId":"a\u0000b"}`, wantErr: true},
		{name: "too big", payload: `{"state":"online","at":"2026-03-01T12:00:00Z","detail":"` + strings.Repeat("d", MaxStatusPayload) + `"}`, wantErr: true},
		{name: "empty", payload: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseStatusReport([]byte(tt.payload))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidInput) {
					t.Errorf("ParseStatusReport = %+v, %v; want ErrInvalidInput", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseStatusReport: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseStatusReport(f *testing.F) {
	f.Add([]byte(`{"state":"running","commandId":"c1","at":"2026-03-01T12:00:00Z","detail":"ok","agentVersion":"1"}`))
	f.Add([]byte(`{"state":"online","at":"2026-03-01T12:00:00Z"}`))
	f.Add([]byte(`{"state":"revoked","at":"2026-03-01T12:00:00Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := ParseStatusReport(payload)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error %v does not wrap ErrInvalidInput", err)
			}
			return
		}
		if len(payload) > MaxStatusPayload || !Reportable(r.State) || r.At.IsZero() || r.At.Location() != time.UTC {
			t.Fatalf("accepted invalid report %+v from %q", r, payload)
		}
	})
}
