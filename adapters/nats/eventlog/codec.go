package eventlog

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/rxc-project/rxc/adapters/eventpb"
	"github.com/rxc-project/rxc/core/events"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// encode writes ev as the sensor's own message; tenant and sensor travel in
// the subject.
func encode(ev events.Event) ([]byte, error) {
	return proto.Marshal(eventpb.FromEvent(ev))
}

// decode reads a logged event; the caller stamps identity and received_at.
func decode(data []byte) (events.Event, error) {
	var pb sensorpb.SensorEvent
	if err := proto.Unmarshal(data, &pb); err != nil {
		return events.Event{}, fmt.Errorf("%w: %v", events.ErrInvalidEvent, err)
	}
	return eventpb.ToEvent(&pb)
}
