// Package topology is the single source of truth for RXC's NATS layout: the
// subjects, consumer names, inbox prefixes, exports, imports and per-user
// permissions docs/architecture.md describes. It holds plain strings and structs only;
// the jwtauthority adapter turns them into signed claims, and the control plane and
// sensor agents use the same functions to address commands and status, so the
// permissions a user is granted and the subjects it uses cannot drift apart.
package topology

import (
	"fmt"
	"time"
)

// Fixed names of the layout.
const (
	// DefaultStream is the command stream's default name (COMMAND_STREAM_NAME).
	DefaultStream = "RXC_CMD"
	// APIPrefix is the local name under which tenant accounts import the
	// CONTROL account's JetStream API. A local "$JS.API" collides with the
	// server's implicit system import and fails.
	APIPrefix = "ctrl.API"
	// CommandWildcard is the command stream's subject filter.
	CommandWildcard = "rxc.*.*.cmd"
	// StatusWildcard matches every sensor's status subject.
	StatusWildcard = "rxc.*.*.status"
	// Inbox is the standard inbox prefix used by CONTROL-account users.
	Inbox = "_INBOX.>"
	// DefaultEventStream is the alert event stream's default name
	// (EVENTS_STREAM_NAME); it lives in CONTROL and is never exported.
	DefaultEventStream = "RXC_EVENTS"
	// EventWildcard is the event stream's subject filter. Its last token
	// keeps it apart from CommandWildcard and StatusWildcard: JetStream
	// refuses streams of one account whose subjects overlap, and
	// "rxc.events.*.*" would overlap "rxc.*.*.cmd".
	EventWildcard = "rxc.*.*.events"
	// EventWriter is the durable consumer that loads events into PostgreSQL.
	EventWriter = "event-writer"
)

// EventSubject is where the control plane appends one sensor's events. The
// tenant and sensor come from the sensor's client certificate.
func EventSubject(tenantID, sensorID string) string {
	return "rxc." + tenantID + "." + sensorID + ".events"
}

// ParseEventSubject extracts tenant and sensor ids from "rxc.<t>.<s>.events".
func ParseEventSubject(subject string) (tenantID, sensorID string, ok bool) {
	return parse(subject, "events")
}

// Sensor names everything one sensor of one tenant uses on NATS.
type Sensor struct {
	Stream   string
	TenantID string
	SensorID string
}

// Consumer is the durable pull consumer holding this sensor's commands.
func (s Sensor) Consumer() string { return fmt.Sprintf("cmd-%s-%s", s.TenantID, s.SensorID) }

// CommandSubject is where the backend publishes this sensor's commands.
func (s Sensor) CommandSubject() string { return fmt.Sprintf("rxc.%s.%s.cmd", s.TenantID, s.SensorID) }

// StatusSubject is where the sensor publishes its status.
func (s Sensor) StatusSubject() string {
	return fmt.Sprintf("rxc.%s.%s.status", s.TenantID, s.SensorID)
}

// InboxPrefix is the sensor's private inbox prefix; it keeps one sensor from
// reading a sibling's pull replies.
func (s Sensor) InboxPrefix() string { return fmt.Sprintf("_INBOX_%s_%s", s.TenantID, s.SensorID) }

// Ack subjects. nats-server acknowledges a delivered message on its reply
// subject, in one of two shapes (server/consumer.go, setConsumerConfig and
// ackReplyInfo):
//
//	v1: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>                 9 tokens
//	v2: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>  11 tokens
//
// Every supported server subscribes the v1 shape with exactly five trailing
// wildcards; 2.15 also subscribes v2 (with a trailing ">") and sends it when
// the js_ack_fc_v2 feature flag is on. A grant must name both shapes by
// counted tokens: any ">" lets a crafted subject of one shape match the other
// — "$JS.ACK.<stream>.<victim>.<stream>.<own>.1.1.1" is a v1 ack of the
// victim's consumer and matched the old v2 grant "$JS.ACK.*.*.<stream>.<own>.>"
// — so a principal could pull ("+NXT") or settle another consumer's messages.
// With counted tokens a 9-token subject can only reach a v1 subscription
// whose stream and consumer tokens are the granted ones, and an 11-token
// subject only a v2 one.

// AckV1 is the v1 ack subject shape of consumer on stream; consumer may be
// "*" (exports and imports).
func AckV1(stream, consumer string) string {
	return "$JS.ACK." + stream + "." + consumer + ".*.*.*.*.*"
}

// AckV2 is the v2 ack subject shape of consumer on stream, in any JetStream
// domain and account hash.
func AckV2(stream, consumer string) string {
	return "$JS.ACK.*.*." + stream + "." + consumer + ".*.*.*.*.*"
}

// Permissions is what the sensor's user may publish and subscribe to.
func (s Sensor) Permissions() Permissions {
	c := s.Consumer()
	return Permissions{
		Publish: []string{
			s.StatusSubject(),
			APIPrefix + ".CONSUMER.MSG.NEXT." + s.Stream + "." + c,
			APIPrefix + ".CONSUMER.INFO." + s.Stream + "." + c,
			AckV1(s.Stream, c),
			AckV2(s.Stream, c),
		},
		Subscribe: []string{s.InboxPrefix() + ".>"},
	}
}

// ParseStatusSubject extracts tenant and sensor ids from "rxc.<t>.<s>.status".
func ParseStatusSubject(subject string) (tenantID, sensorID string, ok bool) {
	return parse(subject, "status")
}

// ParseCommandSubject extracts tenant and sensor ids from "rxc.<t>.<s>.cmd".
func ParseCommandSubject(subject string) (tenantID, sensorID string, ok bool) {
	return parse(subject, "cmd")
}

func parse(subject, kind string) (string, string, bool) {
	var parts [4]string
	n, start := 0, 0
	for i := 0; i <= len(subject); i++ {
		if i < len(subject) && subject[i] != '.' {
			continue
		}
		if n == len(parts) {
			return "", "", false
		}
		parts[n] = subject[start:i]
		n, start = n+1, i+1
	}
	if n != 4 || parts[0] != "rxc" || parts[3] != kind || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// Permissions lists allowed publish and subscribe subjects.
type Permissions struct {
	Publish   []string
	Subscribe []string
	// Responses lets the user answer each request it receives once, on the
	// request's reply subject, within ResponseWindow (NATS
	// allow_responses): how the control plane confirms to a sensor the
	// command results it recorded (docs/fleet-lifecycle.md).
	Responses bool
}

// ResponseWindow is how long after a request a user with Responses may
// answer it.
const ResponseWindow = 2 * time.Minute

// BackendPermissions are the control plane's messaging user's permissions:
// publish commands and events, read status and answer it, and pull and ack
// from the event stream's writer consumer (and nothing else of the
// JetStream API).
func BackendPermissions() Permissions {
	return BackendPermissionsFor(DefaultEventStream)
}

// BackendPermissionsFor is BackendPermissions with a configured event stream.
func BackendPermissionsFor(eventStream string) Permissions {
	return Permissions{
		Publish: []string{
			CommandWildcard,
			EventWildcard,
			"$JS.API.CONSUMER.MSG.NEXT." + eventStream + "." + EventWriter,
			"$JS.API.CONSUMER.INFO." + eventStream + "." + EventWriter,
			AckV1(eventStream, EventWriter),
			AckV2(eventStream, EventWriter),
		},
		Subscribe: []string{StatusWildcard, Inbox},
		// Confirmations of recorded command results answer status reports.
		Responses: true,
	}
}

// ControlAdminPermissions are the JetStream administrator's permissions.
func ControlAdminPermissions() Permissions {
	return Permissions{Publish: []string{"$JS.API.>"}, Subscribe: []string{Inbox}}
}

// SystemPermissions are the provisioner's SYS user's permissions: push claim
// updates and read the replies.
func SystemPermissions() Permissions {
	return Permissions{Publish: []string{"$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"}, Subscribe: []string{Inbox}}
}

// Export is a service export of the CONTROL account.
type Export struct {
	Name    string
	Subject string
	// StreamResponse marks a service whose reply is a stream of messages
	// (pull requests answer with many messages).
	StreamResponse bool
}

// ControlExports are the CONTROL account's public service exports.
func ControlExports(stream string) []Export {
	return []Export{
		{Name: "cmd-pull", Subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", StreamResponse: true},
		{Name: "cmd-info", Subject: "$JS.API.CONSUMER.INFO." + stream + ".*"},
		{Name: "cmd-ack", Subject: AckV1(stream, "*")},
		{Name: "cmd-ack-v2", Subject: AckV2(stream, "*")},
		{Name: "status", Subject: StatusWildcard},
	}
}

// Import is a service import of a tenant account from CONTROL. LocalSubject
// is empty when the subject keeps its name.
type Import struct {
	Name         string
	Subject      string
	LocalSubject string
}

// TenantImports are a tenant account's imports from CONTROL.
func TenantImports(stream, tenantID string) []Import {
	return []Import{
		{Name: "cmd-pull", Subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", LocalSubject: APIPrefix + ".CONSUMER.MSG.NEXT." + stream + ".*"},
		{Name: "cmd-info", Subject: "$JS.API.CONSUMER.INFO." + stream + ".*", LocalSubject: APIPrefix + ".CONSUMER.INFO." + stream + ".*"},
		{Name: "cmd-ack", Subject: AckV1(stream, "*")},
		{Name: "cmd-ack-v2", Subject: AckV2(stream, "*")},
		{Name: "status", Subject: "rxc." + tenantID + ".*.status"},
	}
}
