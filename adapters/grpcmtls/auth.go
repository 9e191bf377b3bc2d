package grpcmtls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/events"
	"github.com/rxc-project/rxc/core/fleet"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// Identity is the sensor a call comes from, read from its verified client
// certificate.
type Identity struct {
	TenantID string
	SensorID string
	// Serial is the certificate serial in lower-case hex.
	Serial string
}

type identityKey struct{}

// IdentityFrom returns the caller's identity inside a handler.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

var (
	errUnauthenticated = errors.New("no valid sensor certificate")
	errTerminated      = fmt.Errorf("sensor session terminated: %w", fleet.ErrRevoked)
	errSuperseded      = fmt.Errorf("sensor certificate superseded: %w", fleet.ErrInvalidToken)
)

// authenticate is the one check every call passes, unary or streaming: the
// handshake verified the chain, so only identity and revocation remain.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	id, err := s.identify(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.auth.AuthorizeSensor(ctx, id.TenantID, id.SensorID, id.Serial); err != nil {
		return nil, fmt.Errorf("authorize sensor %s/%s serial %s: %w", id.TenantID, id.SensorID, id.Serial, err)
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// identify reads the caller's identity from the certificate the handshake
// verified (or the resumed session carried), without authorising it.
func (s *Server) identify(ctx context.Context) (Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, fmt.Errorf("%w: no peer", errUnauthenticated)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return Identity{}, fmt.Errorf("%w: not a TLS connection", errUnauthenticated)
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return Identity{}, fmt.Errorf("%w: no verified client certificate", errUnauthenticated)
	}
	leaf := chains[0][0]
	tenantID, sensorID, err := x509ca.SensorIdentity(leaf)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %w", errUnauthenticated, err)
	}
	return Identity{TenantID: tenantID, SensorID: sensorID, Serial: x509ca.SerialHex(leaf.SerialNumber)}, nil
}

// checkInKey holds the health check's identity, not yet authorised: only
// the health check's handler reads it, and it authorises it in the same
// step that records the check (Heartbeats.CheckIn). IdentityFrom never
// returns it.
type checkInKey struct{}

func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == sensorpb.SensorHealthcheckService_Check_FullMethodName {
		id, err := s.identify(ctx)
		if err != nil {
			return nil, s.refuse(info.FullMethod, err)
		}
		return handler(context.WithValue(ctx, checkInKey{}, id), req)
	}
	ctx, err := s.authenticate(ctx)
	if err != nil {
		return nil, s.refuse(info.FullMethod, err)
	}
	return handler(ctx, req)
}

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return s.refuse(info.FullMethod, err)
	}
	id, _ := IdentityFrom(ctx)
	ctx, unregister := s.register(ctx, id)
	defer unregister()
	return handler(srv, &identifiedStream{ServerStream: ss, ctx: ctx})
}

func isStatus(err error) bool {
	_, ok := status.FromError(err)
	return ok
}

func (s *Server) refuse(method string, err error) error {
	st := s.statusFor(err)
	if c := st.Code(); c == codes.Canceled || c == codes.DeadlineExceeded {
		// The caller gave up (its deadline, its shutdown): nothing was
		// refused, and a fleet of sensors timing out under load must not
		// flood the log with warnings.
		s.log.Debug("sensor call ended by the caller", "method", method, "code", c.String(), logkey.Error, err)
		return st.Err()
	}
	s.log.Warn("sensor call refused", "method", method, "code", st.Code().String(), logkey.Error, err)
	return st.Err()
}

// identifiedStream carries the authenticated, cancellable context into a
// stream handler.
type identifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identifiedStream) Context() context.Context { return s.ctx }

// Seconds a sensor should wait before retrying a call that failed on an
// unavailable dependency, sent as google.rpc.RetryInfo.
const retryDelay = 5 * time.Second

// statusFor is the one place errors become gRPC statuses: a status passes
// through, anything else meets the rows of s.statusTable in order, and what
// matches none is Internal. Messages for internal failures stay generic:
// details go to the log, not the sensor. An outage of a dependency is
// Unavailable with a stable reason (google.rpc.ErrorInfo:
// database_unavailable, nats_unavailable, provisioner_unavailable) and a
// retry delay (google.rpc.RetryInfo), never Internal.
func (s *Server) statusFor(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if isStatus(err) {
		// Already a status, e.g. from the transport: keep it.
		st, _ := status.FromError(err)
		return st
	}
	for _, rule := range s.statusTable {
		if !rule.match(err) {
			continue
		}
		msg := rule.msg
		if msg == "" {
			msg = err.Error()
		}
		if rule.reason != "" {
			return unavailable(rule.reason, msg)
		}
		return status.New(rule.code, msg)
	}
	return status.New(codes.Internal, "internal error")
}

// statusRule is one row of the table that maps errors to gRPC statuses.
type statusRule struct {
	match func(error) bool
	code  codes.Code
	// msg is the status message; empty, the error's own message.
	msg string
	// reason, when set, makes the status Unavailable with this stable
	// reason from the problem catalogue and a retry delay.
	reason problem.Code
}

// statusTable is the gRPC edge's error → status table, first match wins.
// dbDown tells the store's outage errors.
func statusTable(dbDown func(error) bool) []statusRule {
	return []statusRule{
		{match: is(errUnauthenticated), code: codes.Unauthenticated, msg: "a valid sensor certificate is required"},
		{match: is(errTerminated), code: codes.PermissionDenied, msg: "sensor session terminated"},
		{match: is(errSuperseded), code: codes.PermissionDenied, msg: "sensor certificate superseded: reconnect with the current certificate"},
		{match: is(fleet.ErrRevoked, fleet.ErrNotFound, fleet.ErrInvalidToken), code: codes.PermissionDenied, msg: "sensor certificate is not authorised"},
		{match: is(fleet.ErrInvalidInput, events.ErrInvalidEvent), code: codes.InvalidArgument},
		{match: is(events.ErrLogFull), code: codes.ResourceExhausted, msg: "event stream full: resend the events of this call later"},
		{match: is(events.ErrUnavailable), reason: problem.CodeNATSUnavailable, msg: "event stream unavailable: resend the events of this call later"},
		{match: dbDown, reason: problem.CodeDatabaseUnavailable, msg: "the control plane's database is unavailable: retry later"},
		{match: is(context.Canceled), code: codes.Canceled, msg: "call cancelled"},
		{match: is(context.DeadlineExceeded), code: codes.DeadlineExceeded, msg: "deadline exceeded"},
		{match: is(fleet.ErrMessagingUnavailable), reason: problem.CodeNATSUnavailable, msg: "NATS unavailable: retry later"},
		{match: is(fleet.ErrProvisionerUnavailable), reason: problem.CodeProvisionerUnavailable, msg: "NATS provisioner unavailable: retry later"},
	}
}

// is matches an error that is any of targets (problem.Is).
var is = problem.Is

// unavailable is codes.Unavailable with a retry delay and a stable reason
// from the problem catalogue, the code the HTTP edge answers for the same
// condition.
func unavailable(reason problem.Code, msg string) *status.Status {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(
		&errdetails.ErrorInfo{Reason: string(reason), Domain: "rxc"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay)},
	); err == nil {
		return d
	}
	return st
}

// Reason returns the stable reason of an Unavailable status built here
// ("database_unavailable", …), or "".
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
