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

// The wire's shape (unknown fields, trailing data, size) is
// sdk/sensorwire's test; this one is what the values may be.
func TestCheckStatusReport(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	plus2 := time.FixedZone("+02", 7200)
	ok := StatusReport{State: StateOnline, At: at}
	with := func(f func(r *StatusReport)) StatusReport { r := ok; f(&r); return r }
	result := CommandResult{CommandID: "c1", Outcome: OutcomeApplied, At: at}
	tests := []struct {
		name    string
		in      StatusReport
		want    StatusReport
		wantErr bool
	}{
		{
			name: "full",
			in:   StatusReport{State: StateRunning, CommandID: "c1", At: at, Detail: "ok", AgentVersion: "1.2.3"},
			want: StatusReport{State: StateRunning, CommandID: "c1", At: at.Truncate(time.Microsecond), Detail: "ok", AgentVersion: "1.2.3"},
		},
		{
			name: "minimal, other zone",
			in:   StatusReport{State: StateOnline, At: time.Date(2026, 3, 1, 14, 0, 0, 0, plus2)},
			want: StatusReport{State: StateOnline, At: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		},
		{
			name: "results in UTC at microseconds",
			in: with(func(r *StatusReport) {
				r.Results = []CommandResult{{CommandID: "c2", Outcome: OutcomeRefused, Reason: ReasonExpired, At: at.In(plus2)}}
			}),
			want: with(func(r *StatusReport) {
				r.At = at.Truncate(time.Microsecond)
				r.Results = []CommandResult{{CommandID: "c2", Outcome: OutcomeRefused, Reason: ReasonExpired, At: at.Truncate(time.Microsecond)}}
			}),
		},
		{name: "missing at", in: StatusReport{State: StateOnline}, wantErr: true},
		{name: "missing state", in: StatusReport{At: at}, wantErr: true},
		{name: "revoked not reportable", in: with(func(r *StatusReport) { r.State = StateRevoked }), wantErr: true},
		{name: "offline not reportable", in: with(func(r *StatusReport) { r.State = StateOffline }), wantErr: true},
		{name: "long command id", in: with(func(r *StatusReport) { r.CommandID = strings.Repeat("c", 65) }), wantErr: true},
		{name: "command id with NUL", in: with(func(r *StatusReport) { r.CommandID = "a\x00b" }), wantErr: true},
		{name: "too many results", in: with(func(r *StatusReport) {
			for range MaxResults + 1 {
				r.Results = append(r.Results, result)
			}
		}), wantErr: true},
		{name: "applied with a reason", in: with(func(r *StatusReport) { x := result; x.Reason = ReasonExpired; r.Results = []CommandResult{x} }), wantErr: true},
		{name: "refused without a known reason", in: with(func(r *StatusReport) {
			x := result
			x.Outcome = OutcomeRefused
			x.Reason = "bored"
			r.Results = []CommandResult{x}
		}), wantErr: true},
		{name: "unknown outcome", in: with(func(r *StatusReport) { x := result; x.Outcome = "maybe"; r.Results = []CommandResult{x} }), wantErr: true},
		{name: "result without at", in: with(func(r *StatusReport) { x := result; x.At = time.Time{}; r.Results = []CommandResult{x} }), wantErr: true},
		{name: "result without id", in: with(func(r *StatusReport) { x := result; x.CommandID = ""; r.Results = []CommandResult{x} }), wantErr: true},
		{name: "result detail too long", in: with(func(r *StatusReport) {
			x := result
			x.Detail = strings.Repeat("d", maxResultDetail+1)
			r.Results = []CommandResult{x}
		}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := CheckStatusReport(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidInput) {
					t.Errorf("CheckStatusReport = %+v, %v; want ErrInvalidInput", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckStatusReport: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzCheckStatusReport(f *testing.F) {
	f.Add("running", "c1", int64(1772366400), "1", "applied", "")
	f.Add("online", "", int64(0), "", "refused", "expired")
	f.Add("revoked", "c.1", int64(-1), "", "", "")
	f.Fuzz(func(t *testing.T, state, commandID string, at int64, version, outcome, reason string) {
		in := StatusReport{State: State(state), CommandID: commandID, At: time.Unix(at, 0), AgentVersion: version}
		if outcome != "" {
			in.Results = []CommandResult{{CommandID: commandID, Outcome: Outcome(outcome), Reason: reason, At: in.At}}
		}
		r, err := CheckStatusReport(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error %v does not wrap ErrInvalidInput", err)
			}
			return
		}
		if !Reportable(r.State) || r.At.IsZero() || r.At.Location() != time.UTC {
			t.Fatalf("accepted invalid report %+v from %+v", r, in)
		}
	})
}
