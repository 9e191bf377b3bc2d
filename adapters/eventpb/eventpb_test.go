package eventpb_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/eventpb"
	"github.com/rxc-project/rxc/core/events"
	sensorpb "github.com/rxc-project/rxc/proto"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   events.Event
	}{
		{"alert with addresses", events.Event{
			ID: "e-1", Time: time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC), Kind: "alert",
			SrcIP: netip.MustParseAddr("203.0.113.9"), SrcPort: 40000, DestIP: netip.MustParseAddr("2001:db8::7"), DestPort: 443, Protocol: "TCP",
			Alert:   &events.Alert{SignatureID: 2034647, Signature: "ET EXPLOIT Log4j", Category: "Attempted Administrator Privilege Gain", Severity: 1},
			RawJSON: []byte(`{"event_type":"alert"}`),
		}},
		{"no addresses, no alert", events.Event{ID: "e-2", Time: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Kind: "flow"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := eventpb.ToEvent(eventpb.FromEvent(tt.ev))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.ev, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToEventRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pb   *sensorpb.SensorEvent
	}{
		{"time out of range", &sensorpb.SensorEvent{EventId: "e", Kind: "alert", Time: &timestamppb.Timestamp{Seconds: -1 << 62}}},
		{"bad source address", &sensorpb.SensorEvent{EventId: "e", Kind: "alert", Time: timestamppb.Now(), SrcIp: "300.1.1.1"}},
		{"bad destination address", &sensorpb.SensorEvent{EventId: "e", Kind: "alert", Time: timestamppb.Now(), DestIp: "not-an-ip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := eventpb.ToEvent(tt.pb); !errors.Is(err, events.ErrInvalidEvent) {
				t.Errorf("ToEvent error = %v, want ErrInvalidEvent", err)
			}
		})
	}
}
