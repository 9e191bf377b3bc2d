// Package eventpb converts between core's events.Event and the wire message
// sensorpb.SensorEvent. The gRPC edge reads what sensors send with it, and
// the event log stores the same message, so both sides agree on one mapping.
// Tenant, sensor and receipt time are not part of the message: the gRPC
// edge takes them from the certificate, the log from the subject.
package eventpb

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/core/events"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// ToEvent reads pb. A missing time stays zero (events.Validate refuses it);
// a malformed time or address wraps events.ErrInvalidEvent.
func ToEvent(pb *sensorpb.SensorEvent) (events.Event, error) {
	ev := events.Event{
		ID: pb.GetEventId(), Kind: pb.GetKind(), SrcPort: pb.GetSrcPort(), DestPort: pb.GetDestPort(),
		Protocol: pb.GetProtocol(), RawJSON: pb.GetRawJson(),
	}
	if t := pb.GetTime(); t != nil {
		if err := t.CheckValid(); err != nil {
			return events.Event{}, fmt.Errorf("%w: time: %v", events.ErrInvalidEvent, err)
		}
		ev.Time = t.AsTime()
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

// FromEvent writes ev as the wire message.
func FromEvent(ev events.Event) *sensorpb.SensorEvent {
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
	return pb
}
