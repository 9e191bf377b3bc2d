package sensorbus

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// The command a sensor receives carries exactly the documented fields.
func TestEncodeCommand(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	data, err := encodeCommand(fleet.Command{
		ID: "c1", TenantID: "acme", SensorID: "s1", Action: fleet.ActionStart,
		IssuedAt: at, IssuedBy: "ops@example.com", ExpiresAt: at.Add(10 * time.Minute),
		// Not for the sensor: never on the wire.
		IdempotencyKey: "k", Status: fleet.CommandAccepted, BatchID: "b1",
	})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"commandId": "c1", "tenantId": "acme", "sensorId": "s1", "action": "start",
		"issuedAt": "2026-11-21T09:00:00Z", "issuedBy": "ops@example.com", "expiresAt": "2026-11-21T09:10:00Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wire command (-want +got):\n%s", diff)
	}
}

func TestDecodeStatus(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	tests := []struct {
		name    string
		payload string
		want    fleet.StatusReport
		wantErr bool
	}{
		{
			name: "full",
			payload: `{"state":"running","commandId":"c1","at":"2026-03-01T12:00:00.123456789Z","detail":"ok","agentVersion":"1.2.3",` +
				`"results":[{"commandId":"c0","outcome":"refused","reason":"expired","detail":"late","at":"2026-03-01T12:00:00.123456789Z"}]}`,
			want: fleet.StatusReport{
				State: fleet.StateRunning, CommandID: "c1", At: at, Detail: "ok", AgentVersion: "1.2.3",
				Results: []fleet.CommandResult{{CommandID: "c0", Outcome: fleet.OutcomeRefused, Reason: fleet.ReasonExpired, Detail: "late", At: at}},
			},
		},
		// Values are the fleet service's to check: decoded as they are.
		{name: "unreportable state", payload: `{"state":"revoked"}`, want: fleet.StatusReport{State: fleet.StateRevoked}},
		{name: "unknown field", payload: `{"state":"online","at":"2026-03-01T12:00:00Z","sensorId":"x"}`, wantErr: true},
		{name: "trailing object", payload: `{"state":"online"}{}`, wantErr: true},
		{name: "not an object", payload: `["online"]`, wantErr: true},
		{name: "too big", payload: `{"detail":"` + strings.Repeat("d", sensorwire.MaxStatusBytes) + `"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeStatus([]byte(tt.payload))
			if tt.wantErr {
				if !errors.Is(err, sensorwire.ErrMalformed) {
					t.Errorf("decodeStatus = %+v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}
