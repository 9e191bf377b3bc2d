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
			"$JS.ACK.RXC_CMD.cmd-acme-s-1.*.*.*.*.*",
			"$JS.ACK.*.*.RXC_CMD.cmd-acme-s-1.*.*.*.*.*",
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

// matches reports whether a NATS subject matches a pattern ("*" one token,
// a trailing ">" one or more), as nats-server's sublist does.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return i == len(p)-1 && len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}

// serverAckSubscriptions are the subscriptions nats-server 2.11–2.15 makes
// for one consumer's acks (server/consumer.go): v1 with five counted
// wildcards, v2 (2.15) with four and a trailing ">".
func serverAckSubscriptions(stream, consumer string) []string {
	return []string{
		"$JS.ACK." + stream + "." + consumer + ".*.*.*.*.*",
		"$JS.ACK._.HASH." + stream + "." + consumer + ".*.*.*.*.>",
	}
}

// TestAckGrantsReachOnlyTheirConsumer crafts every ack-like subject of 9 to
// 13 tokens from the names in play (streams, consumers of two tenants that
// share a prefix, the event writer) and checks that whenever a principal's
// grant lets it publish the subject, the only consumer subscription the
// subject can reach is the principal's own. This is the shape of the hole
// the first release had: "$JS.ACK.RXC_CMD.<victim>.RXC_CMD.<own>.1.1.1".
func TestAckGrantsReachOnlyTheirConsumer(t *testing.T) {
	t.Parallel()
	const stream, events = "RXC_CMD", "RXC_EVENTS"
	own := Sensor{Stream: stream, TenantID: "acme", SensorID: "s1"}
	consumers := map[string]string{ // consumer -> stream
		own.Consumer(): stream,
		Sensor{Stream: stream, TenantID: "acme", SensorID: "s2"}.Consumer():    stream,
		Sensor{Stream: stream, TenantID: "acme-eu", SensorID: "s1"}.Consumer(): stream,
		EventWriter: events,
	}
	principals := map[string]struct {
		grants []string
		own    string
	}{
		"sensor":  {own.Permissions().Publish, own.Consumer()},
		"backend": {BackendPermissionsFor(events).Publish, EventWriter},
	}
	alphabet := []string{"RXC_CMD", "RXC_EVENTS", "_", "HASH", "1"}
	for c := range consumers {
		alphabet = append(alphabet, c)
	}
	var bases, subjects []string
	var build func(prefix []string, n int)
	build = func(prefix []string, n int) {
		if n == 0 {
			bases = append(bases, strings.Join(prefix, "."))
			return
		}
		for _, tok := range alphabet {
			build(append(prefix, tok), n-1)
		}
	}
	// "$JS.ACK." and up to four chosen tokens, then "1"s to the length:
	// every placement of stream and consumer names in the positions the
	// server reads.
	for chosen := 1; chosen <= 4; chosen++ {
		bases = bases[:0]
		build([]string{"$JS", "ACK"}, chosen)
		for _, base := range bases {
			for total := 9; total <= 13; total++ {
				s := base
				for n := 2 + chosen; n < total; n++ {
					s += ".1"
				}
				subjects = append(subjects, s)
			}
		}
	}
	checked := 0
	for name, p := range principals {
		for _, subj := range subjects {
			granted := false
			for _, g := range p.grants {
				if strings.HasPrefix(g, "$JS.ACK.") && matches(g, subj) {
					granted = true
				}
			}
			if !granted {
				continue
			}
			checked++
			for c, st := range consumers {
				for _, sub := range serverAckSubscriptions(st, c) {
					if matches(sub, subj) && c != p.own {
						t.Errorf("%s may publish %q, which reaches consumer %s's subscription %q", name, subj, c, sub)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no crafted subject was granted: the test checks nothing")
	}
	// The old grants fail this test (the negative control of the checker).
	old := "$JS.ACK.*.*." + stream + "." + own.Consumer() + ".>"
	victim := "$JS.ACK." + stream + ".cmd-acme-s2." + stream + "." + own.Consumer() + ".1.1.1"
	if !matches(old, victim) || !matches(serverAckSubscriptions(stream, "cmd-acme-s2")[0], victim) {
		t.Fatal("matcher does not reproduce the first release's hole")
	}
}

func TestControlExportsAndImportsAreCounted(t *testing.T) {
	t.Parallel()
	for _, e := range ControlExports("RXC_CMD") {
		if strings.Contains(e.Subject, ">") {
			t.Errorf("export %s = %q: a '>' can swallow another ack shape", e.Name, e.Subject)
		}
	}
	for _, im := range TenantImports("RXC_CMD", "acme") {
		if strings.Contains(im.Subject, ">") {
			t.Errorf("import %s = %q: a '>' can swallow another ack shape", im.Name, im.Subject)
		}
	}
}
