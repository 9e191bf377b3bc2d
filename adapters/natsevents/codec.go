package natsevents

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/core/events"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// encode writes ev as the sensor's own message; tenant and sensor travel in
// the subject.
func encode(ev events.Event) ([]byte, error) {
	pb := &sensorpb.SensorEvent{
		EventId: ev.ID, Time: timestamppb.New(ev.Time), Kind: ev.Kind,
		SrcPort: ev.SrcPort, DestPort: ev.DestPort, Protocol: ev.Protocol, RawJson: ev.RawJSON,
	}
	if ev.SrcIP.IsValid() {
		pb.SrcIp = ev.SrcIP.String()
	}
	if ev.DestIP.IsValid() {
		pb.DestIp = ev.DestIP.String()
	}
	if a := ev.Alert; a != nil {
		pb.Alert = &sensorpb.Alert{SignatureId: a.SignatureID, Signature: a.Signature, Category: a.Category, Severity: a.Severity}
	}
	return proto.Marshal(pb)
}

// decode reads a logged event; the caller stamps identity and received_at.
func decode(data []byte) (events.Event, error) {
	var pb sensorpb.SensorEvent
	if err := proto.Unmarshal(data, &pb); err != nil {
		return events.Event{}, fmt.Errorf("%w: %v", events.ErrInvalidEvent, err)
	}
	ev := events.Event{
		ID: pb.GetEventId(), Kind: pb.GetKind(), SrcPort: pb.GetSrcPort(), DestPort: pb.GetDestPort(),
		Protocol: pb.GetProtocol(), RawJSON: pb.GetRawJson(),
	}
	if pb.GetTime() != nil {
		ev.Time = pb.GetTime().AsTime()
	}
	var err error
	if ev.SrcIP, err = events.ParseAddr(pb.GetSrcIp()); err != nil {
		return events.Event{}, err
	}
	if ev.DestIP, err = events.ParseAddr(pb.GetDestIp()); err != nil {
		return events.Event{}, err
	}
	if a := pb.GetAlert(); a != nil {
		ev.Alert = &events.Alert{SignatureID: a.GetSignatureId(), Signature: a.GetSignature(), Category: a.GetCategory(), Severity: a.GetSeverity()}
	}
	return ev, nil
}
