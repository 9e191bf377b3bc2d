// Package events holds the alert event pipeline's domain: what a sensor's
// event is and which ones are accepted (Validate), the CVE ids found in one
// (ExtractCVEs), and the two use cases with their ports. Ingest takes a
// sensor's events from the gRPC edge, stamps them with the tenant and sensor
// of the client certificate and appends them to a durable log with
// back-pressure (Log, Appender). Writer drains that log in batches into the
// queryable store (Source, Batch, Store) and acknowledges a batch only after
// the store committed it, so a crash between the two leads to a redelivery,
// which the store absorbs by ignoring rows it already holds.
package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors of the package; callers test them with errors.Is.
var (
	// ErrInvalidEvent is wrapped when an event breaks a rule of Validate.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrLogFull is wrapped when the log refuses events because it is full;
	// the sensor should retry later.
	ErrLogFull = errors.New("event log full")
	// ErrUnavailable is wrapped when the log cannot be reached or did not
	// acknowledge in time; the sensor should retry.
	ErrUnavailable = errors.New("event log unavailable")
)

// Limits of one event.
const (
	MaxEventID   = 128
	MaxKind      = 32
	MaxProtocol  = 16
	MaxSignature = 512
	MaxCategory  = 256
	MaxSeverity  = 255
	MaxRawJSON   = 64 << 10
	// MaxAge and MaxSkew bound an event's time relative to the receiver's
	// clock: older events are refused, as are events too far in the future.
	MaxAge  = 30 * 24 * time.Hour
	MaxSkew = 5 * time.Minute
	// maxCVEs bounds the ids kept per event; a record listing more is noise.
	maxCVEs = 64
)

// Event is one detection event. TenantID and SensorID always come from the
// sensor's client certificate, never from what it sent.
type Event struct {
	TenantID string
	SensorID string
	// ID is the sensor's idempotency key: a resent event carries the same
	// ID and Time.
	ID         string
	Time       time.Time
	ReceivedAt time.Time
	Kind       string
	SrcIP      netip.Addr // zero when absent
	SrcPort    uint32     // 0 when absent
	DestIP     netip.Addr
	DestPort   uint32
	Protocol   string
	Alert      *Alert
	// CVEs are filled by the writer with ExtractCVEs.
	CVEs []string
	// RawJSON is the original record, e.g. a Suricata EVE line; nil when absent.
	RawJSON []byte
}

// Alert is the signature part of an alert event.
type Alert struct {
	SignatureID int64
	Signature   string
	Category    string
	Severity    int32
}

// Validate checks ev against the limits at time now. It does not look at
// TenantID and SensorID, which the caller stamps.
func Validate(ev Event, now time.Time) error {
	if err := validateID(ev.ID); err != nil {
		return err
	}
	switch {
	case ev.Time.IsZero():
		return invalid("time is required")
	case ev.Time.Before(now.Add(-MaxAge)):
		return invalid("time %s is more than %s in the past", ev.Time.UTC().Format(time.RFC3339), MaxAge)
	case ev.Time.After(now.Add(MaxSkew)):
		return invalid("time %s is more than %s in the future", ev.Time.UTC().Format(time.RFC3339), MaxSkew)
	case ev.Kind == "":
		return invalid("kind is required")
	case len(ev.Kind) > MaxKind:
		return invalid("kind longer than %d bytes", MaxKind)
	case len(ev.Protocol) > MaxProtocol:
		return invalid("protocol longer than %d bytes", MaxProtocol)
	case ev.SrcPort > 65535 || ev.DestPort > 65535:
		return invalid("port out of range")
	case len(ev.RawJSON) > MaxRawJSON:
		return invalid("raw_json of %d bytes exceeds %d", len(ev.RawJSON), MaxRawJSON)
	case len(ev.RawJSON) > 0 && (!utf8.Valid(ev.RawJSON) || !json.Valid(ev.RawJSON)):
		return invalid("raw_json is not valid UTF-8 JSON")
	case bytes.Contains(ev.RawJSON, []byte(`\u0000`)):
		// PostgreSQL's jsonb cannot hold a NUL character.
		return invalid("raw_json holds \\u0000")
	case !cleanText(ev.Kind) || !cleanText(ev.Protocol):
		return invalid("kind and protocol must be UTF-8 without NUL")
	}
	if a := ev.Alert; a != nil {
		switch {
		case len(a.Signature) > MaxSignature:
			return invalid("alert signature longer than %d bytes", MaxSignature)
		case len(a.Category) > MaxCategory:
			return invalid("alert category longer than %d bytes", MaxCategory)
		case a.Severity < 0 || a.Severity > MaxSeverity:
			return invalid("alert severity %d outside 0–%d", a.Severity, MaxSeverity)
		case !cleanText(a.Signature) || !cleanText(a.Category):
			return invalid("alert signature and category must be UTF-8 without NUL")
		}
	}
	return nil
}

// ParseAddr reads an optional IP address (v4 or v6): "" gives the zero Addr.
// A zone is refused: it means nothing off the sensor's host.
func ParseAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, invalid("%q is not an IP address", truncate(s, 64))
	}
	return a, nil
}

func validateID(id string) error {
	if id == "" || len(id) > MaxEventID {
		return invalid("event_id must be 1–%d characters", MaxEventID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return invalid("event_id may hold only A-Z a-z 0-9 . _ : -")
		}
	}
	return nil
}

// cleanText reports whether s can be stored as PostgreSQL text.
func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// MsgID is the log's de-duplication key of an event: a resend within the
// log's duplicate window is acknowledged without being stored twice.
func MsgID(tenantID, sensorID, eventID string) string {
	return tenantID + "." + sensorID + "." + eventID
}

// ExtractCVEs returns the CVE ids mentioned in texts — "CVE-YYYY-NNNN" with
// 4 to 7 digits at the end, any case, hyphens or (as in Emerging Threats
// rule metadata) underscores, not inside a longer word — upper-case with
// hyphens, each once, sorted, at most 64. It scans by hand: it runs on
// every event and a regular expression costs several times more.
func ExtractCVEs(texts ...string) []string {
	var out []string
	for _, t := range texts {
		for i := 0; i+len("CVE-0000-0000") <= len(t); i++ {
			if id, ok := cveAt(t, i); ok {
				out = append(out, id)
				i += len(id) - 1
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxCVEs {
		out = out[:maxCVEs]
	}
	return out
}

// cveAt reads a CVE id starting at t[i].
func cveAt(t string, i int) (string, bool) {
	if t[i]|0x20 != 'c' || t[i+1]|0x20 != 'v' || t[i+2]|0x20 != 'e' || !isSep(t[i+3]) || i > 0 && isAlnum(t[i-1]) {
		return "", false
	}
	j := i + 4
	year := digits(t, j, 4)
	if year != 4 || j+4 >= len(t) || !isSep(t[j+4]) {
		return "", false
	}
	j += 5
	n := digits(t, j, 8)
	if n < 4 || n > 7 || j+n < len(t) && isAlnum(t[j+n]) {
		return "", false
	}
	return "CVE-" + t[i+4:i+8] + "-" + t[j:j+n], true
}

// digits counts the ASCII digits at t[j:], up to limit.
func digits(t string, j, limit int) int {
	n := 0
	for j+n < len(t) && n < limit && '0' <= t[j+n] && t[j+n] <= '9' {
		n++
	}
	return n
}

func isSep(c byte) bool { return c == '-' || c == '_' }

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
