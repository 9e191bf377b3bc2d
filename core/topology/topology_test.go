package topology

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSensorNames(t *testing.T) {
	t.Parallel()
	s := Sensor{Stream: "RXC_CMD", TenantID: "acme", SensorID: "s-1"}
	got := map[string]string{
		"consumer": s.Consumer(),
		"command":  s.CommandSubject(),
		"status":   s.StatusSubject(),
		"inbox":    s.InboxPrefix(),
	}
	want := map[string]string{
		"consumer": "cmd-acme-s-1",
		"command":  "rxc.acme.s-1.cmd",
		"status":   "rxc.acme.s-1.status",
		"inbox":    "_INBOX_acme_s-1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
	wantPerms := Permissions{
		Publish: []string{
			"rxc.acme.s-1.status",
			"ctrl.API.CONSUMER.MSG.NEXT.RXC_CMD.cmd-acme-s-1",
			"ctrl.API.CONSUMER.INFO.RXC_CMD.cmd-acme-s-1",
			"$JS.ACK.RXC_CMD.cmd-acme-s-1.>",
			"$JS.ACK.*.*.RXC_CMD.cmd-acme-s-1.>",
		},
		Subscribe: []string{"_INBOX_acme_s-1.>"},
	}
	if d := cmp.Diff(wantPerms, s.Permissions()); d != "" {
		t.Fatalf("permissions (-want +got):\n%s", d)
	}
}

func TestParseSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, subject, kind string
		tenant, sensor      string
		ok                  bool
	}{
		{"status", "rxc.acme.s1.status", "status", "acme", "s1", true},
		{"command", "rxc.acme.s1.cmd", "cmd", "acme", "s1", true},
		{"wrong kind", "rxc.acme.s1.cmd", "status", "", "", false},
		{"too many tokens", "rxc.acme.s1.x.status", "status", "", "", false},
		{"too few tokens", "rxc.acme.status", "status", "", "", false},
		{"empty tenant", "rxc..s1.status", "status", "", "", false},
		{"empty sensor", "rxc.acme..status", "status", "", "", false},
		{"other root", "abc.acme.s1.status", "status", "", "", false},
		{"empty", "", "status", "", "", false},
		{"trailing dot", "rxc.acme.s1.status.", "status", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parse := ParseStatusSubject
			if tt.kind == "cmd" {
				parse = ParseCommandSubject
			}
			tenant, sensor, ok := parse(tt.subject)
			if tenant != tt.tenant || sensor != tt.sensor || ok != tt.ok {
				t.Fatalf("parse(%q) = %q, %q, %v; want %q, %q, %v", tt.subject, tenant, sensor, ok, tt.tenant, tt.sensor, tt.ok)
			}
		})
	}
}

func FuzzParseStatusSubject(f *testing.F) {
	for _, s := range []string{"rxc.a.b.status", "rxc...status", "x", "rxc.a.b.c.status"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		tenant, sensor, ok := ParseStatusSubject(subject)
		if !ok {
			return
		}
		s := Sensor{TenantID: tenant, SensorID: sensor}
		if got := s.StatusSubject(); got != subject {
			t.Fatalf("round trip of %q gave %q", subject, got)
		}
	})
}

func TestEventSubjects(t *testing.T) {
	t.Parallel()
	if got := EventSubject("acme", "s1"); got != "rxc.acme.s1.events" {
		t.Fatalf("EventSubject = %q", got)
	}
	tests := []struct {
		subject, tenant, sensor string
		ok                      bool
	}{
		{"rxc.acme.s1.events", "acme", "s1", true},
		{"rxc.events.acme.s1", "", "", false},
		{"rxc.acme.events", "", "", false},
		{"rxc.acme.s1.events.x", "", "", false},
		{"rxc..s1.events", "", "", false},
		{"rxc.acme.s1.status", "", "", false},
	}
	for _, tt := range tests {
		tenant, sensor, ok := ParseEventSubject(tt.subject)
		if tenant != tt.tenant || sensor != tt.sensor || ok != tt.ok {
			t.Errorf("ParseEventSubject(%q) = %q, %q, %v", tt.subject, tenant, sensor, ok)
		}
	}
}

// JetStream refuses two streams of one account whose subjects overlap, and
// the backend's status subscription must not receive events.
func TestEventWildcardOverlapsNothing(t *testing.T) {
	t.Parallel()
	for _, other := range []string{CommandWildcard, StatusWildcard} {
		if overlap(EventWildcard, other) {
			t.Errorf("%s overlaps %s", EventWildcard, other)
		}
	}
	if !overlap("rxc.events.*.*", CommandWildcard) {
		t.Error("overlap misses a known collision")
	}
}

// overlap reports whether two subjects of literal and "*" tokens can match
// one subject.
func overlap(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != "*" && tb[i] != "*" && ta[i] != tb[i] {
			return false
		}
	}
	return true
}
