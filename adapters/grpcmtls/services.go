package grpcmtls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rxc-project/rxc/adapters/eventpb"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
)

type healthService struct {
	sensorpb.UnimplementedSensorHealthcheckServiceServer
	s *Server
}

// Check authorises the caller's certificate and records the check in one
// step (Heartbeats.CheckIn); a refusal is answered and logged as the
// interceptor answers any other call's.
func (h healthService) Check(ctx context.Context, req *sensorpb.CheckRequest) (*sensorpb.CheckResponse, error) {
	id, ok := ctx.Value(checkInKey{}).(Identity)
	if !ok {
		return nil, h.s.statusFor(errUnauthenticated).Err()
	}
	err := h.s.beats.CheckIn(ctx, id.TenantID, id.SensorID, id.Serial, fleet.Contact{Address: peerHost(ctx), AgentVersion: req.GetAgentVersion()})
	switch {
	case err == nil:
	case errors.Is(err, fleet.ErrRevoked), errors.Is(err, fleet.ErrNotFound), errors.Is(err, fleet.ErrInvalidToken),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, h.s.refuse(sensorpb.SensorHealthcheckService_Check_FullMethodName,
			fmt.Errorf("authorize sensor %s/%s serial %s: %w", id.TenantID, id.SensorID, id.Serial, err))
	default:
		h.s.log.Error("recording sensor health check", logkey.Tenant, id.TenantID, logkey.Sensor, id.SensorID, logkey.Error, err)
		return nil, h.s.statusFor(err).Err()
	}
	return &sensorpb.CheckResponse{
		Status:     sensorpb.CheckResponse_SERVING_STATUS_SERVING,
		ServerTime: timestamppb.Now(),
	}, nil
}

// peerHost is the address the call came from, without its port ("" when
// unknown).
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}

type eventService struct {
	sensorpb.UnimplementedSensorEventStreamServiceServer
	s *Server
}

type received struct {
	ev  *sensorpb.SensorEvent
	err error
}

// StreamEvents takes events until the sensor closes its side. Recv cannot be
// interrupted, so it runs in its own goroutine and the handler also watches
// the stream context, which Terminate cancels; returning ends the stream and
// with it the pending Recv.
func (e eventService) StreamEvents(stream sensorpb.SensorEventStreamService_StreamEventsServer) error {
	ctx := stream.Context()
	id, ok := IdentityFrom(ctx)
	if !ok {
		return e.s.statusFor(errUnauthenticated).Err()
	}
	// A little buffer lets Recv run ahead of the handler instead of
	// switching goroutines on every event.
	in := make(chan received, 64)
	go func() {
		for {
			ev, err := stream.Recv()
			select {
			case in <- received{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	if e.s.ingest != nil {
		return e.ingest(stream, id, in)
	}
	var accepted uint64
	for {
		select {
		case <-ctx.Done():
			cause := context.Cause(ctx)
			e.s.log.Info("event stream ended by server", logkey.Tenant, id.TenantID, logkey.Sensor, id.SensorID, "accepted", accepted, "cause", cause)
			return e.s.statusFor(cause).Err()
		case r := <-in:
			if errors.Is(r.err, io.EOF) {
				return stream.SendAndClose(&sensorpb.StreamEventsResponse{Accepted: accepted})
			}
			if r.err != nil {
				return e.s.statusFor(r.err).Err()
			}
			if err := validate(r.ev); err != nil {
				e.s.log.Info("event refused", logkey.Tenant, id.TenantID, logkey.Sensor, id.SensorID, "accepted", accepted, logkey.Error, err)
				return e.s.statusFor(err).Err()
			}
			if err := e.s.events.AcceptEvent(ctx, id, r.ev); err != nil {
				e.s.log.Error("storing event", logkey.Tenant, id.TenantID, logkey.Sensor, id.SensorID, "event_id", r.ev.GetEventId(), logkey.Error, err)
				return e.s.statusFor(err).Err()
			}
			accepted++
		}
	}
}

// drainTimeout bounds waiting for the log's acknowledgements of a stream
// that ends early.
const drainTimeout = 10 * time.Second

// ingest is StreamEvents with an EventIngest: events are appended without
// waiting for each acknowledgement; the call succeeds only when the log
// acknowledged every event. On failure the trailer "rxc-accepted" still
// says how many were stored.
func (e eventService) ingest(stream sensorpb.SensorEventStreamService_StreamEventsServer, id Identity, in <-chan received) error {
	ctx := stream.Context()
	sess := e.s.ingest.Open(id.TenantID, id.SensorID)
	end := func(cause error) error {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
		defer cancel()
		accepted, err := sess.Close(dctx)
		stream.SetTrailer(metadata.Pairs("rxc-accepted", strconv.FormatUint(accepted, 10)))
		if cause == nil && err == nil {
			return stream.SendAndClose(&sensorpb.StreamEventsResponse{Accepted: accepted})
		}
		if cause == nil {
			cause = err
		}
		st := e.s.statusFor(cause)
		e.s.log.Info("event stream failed", logkey.Tenant, id.TenantID, logkey.Sensor, id.SensorID, "accepted", accepted, "code", st.Code().String(), logkey.Error, cause)
		return st.Err()
	}
	for {
		select {
		case <-ctx.Done():
			return end(context.Cause(ctx))
		case r := <-in:
			if errors.Is(r.err, io.EOF) {
				return end(nil)
			}
			if r.err != nil {
				return end(r.err)
			}
			// The session validates (events.Validate): one rule set for
			// every edge.
			ev, err := eventpb.ToEvent(r.ev)
			if err != nil {
				return end(err)
			}
			if err := sess.Add(ctx, ev); err != nil {
				return end(err)
			}
		}
	}
}

// validate applies events.Validate, the one rule set for events, to a
// message for the sink path (the ingest path's session applies it itself).
func validate(pb *sensorpb.SensorEvent) error {
	ev, err := eventpb.ToEvent(pb)
	if err != nil {
		return err
	}
	return events.Validate(ev, time.Now())
}

// LogSink is the default EventSink until events are stored: it logs each
// event's envelope at debug level, never the raw record.
type LogSink struct {
	Logger *slog.Logger
}

// AcceptEvent logs ev.
func (l LogSink) AcceptEvent(ctx context.Context, from Identity, ev *sensorpb.SensorEvent) error {
	l.Logger.DebugContext(ctx, "sensor event",
		logkey.Tenant, from.TenantID, logkey.Sensor, from.SensorID,
		"event_id", ev.GetEventId(), "kind", ev.GetKind(), "raw_bytes", len(ev.GetRawJson()))
	return nil
}
