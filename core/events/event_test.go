package events_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/events"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func valid() events.Event {
	return events.Event{
		ID: "s1-42:a_b.c", Time: now.Add(-time.Minute), Kind: "alert",
		SrcIP: netip.MustParseAddr("192.0.2.1"), SrcPort: 51000, DestIP: netip.MustParseAddr("2001:db8::1"), DestPort: 443, Protocol: "TCP",
		Alert:   &events.Alert{SignatureID: 2030358, Signature: "ET EXPLOIT Log4j (CVE-2021-44228)", Category: "Attempted Administrator Privilege Gain", Severity: 1},
		RawJSON: []byte(`{"event_type":"alert"}`),
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	with := func(change func(*events.Event)) events.Event {
		ev := valid()
		change(&ev)
		return ev
	}
	tests := []struct {
		name string
		ev   events.Event
		ok   bool
	}{
		{"valid", valid(), true},
		{"no alert, no raw", with(func(e *events.Event) { e.Alert, e.RawJSON = nil, nil }), true},
		{"event_id of 128", with(func(e *events.Event) { e.ID = strings.Repeat("a", 128) }), true},
		{"event_id of 129", with(func(e *events.Event) { e.ID = strings.Repeat("a", 129) }), false},
		{"empty event_id", with(func(e *events.Event) { e.ID = "" }), false},
		{"event_id with a space", with(func(e *events.Event) { e.ID = "a b" }), false},
		{"event_id with a slash", with(func(e *events.Event) { e.ID = "a/b" }), false},
		{"event_id with a star", with(func(e *events.Event) { e.ID = "a*" }), false},
		{"event_id non-ASCII", with(func(e *events.Event) { e.ID = "é" }), false},
		{"no time", with(func(e *events.Event) { e.Time = time.Time{} }), false},
		{"time 30 days ago", with(func(e *events.Event) { e.Time = now.Add(-events.MaxAge) }), true},
		{"time older than 30 days", with(func(e *events.Event) { e.Time = now.Add(-events.MaxAge - time.Second) }), false},
		{"time 5 minutes ahead", with(func(e *events.Event) { e.Time = now.Add(events.MaxSkew) }), true},
		{"time further ahead", with(func(e *events.Event) { e.Time = now.Add(events.MaxSkew + time.Second) }), false},
		{"no kind", with(func(e *events.Event) { e.Kind = "" }), false},
		{"kind of 32", with(func(e *events.Event) { e.Kind = strings.Repeat("k", 32) }), true},
		{"kind of 33", with(func(e *events.Event) { e.Kind = strings.Repeat("k", 33) }), false},
		{"protocol of 17", with(func(e *events.Event) { e.Protocol = strings.Repeat("p", 17) }), false},
		{"port 65535", with(func(e *events.Event) { e.DestPort = 65535 }), true},
		{"port 65536", with(func(e *events.Event) { e.SrcPort = 65536 }), false},
		{"signature of 512", with(func(e *events.Event) { e.Alert.Signature = strings.Repeat("s", 512) }), true},
		{"signature of 513", with(func(e *events.Event) { e.Alert.Signature = strings.Repeat("s", 513) }), false},
		{"category of 257", with(func(e *events.Event) { e.Alert.Category = strings.Repeat("c", 257) }), false},
		{"severity 255", with(func(e *events.Event) { e.Alert.Severity = 255 }), true},
		{"severity 256", with(func(e *events.Event) { e.Alert.Severity = 256 }), false},
		{"severity -1", with(func(e *events.Event) { e.Alert.Severity = -1 }), false},
		{"raw_json at 64 KiB", with(func(e *events.Event) {
			e.RawJSON = []byte(`"` + strings.Repeat("x", events.MaxRawJSON-2) + `"`)
		}), true},
		{"raw_json over 64 KiB", with(func(e *events.Event) {
			e.RawJSON = []byte(`"` + strings.Repeat("x", events.MaxRawJSON-1) + `"`)
		}), false},
		{"raw_json not JSON", with(func(e *events.Event) { e.RawJSON = []byte(`{"a":`) }), false},
		{"raw_json not UTF-8", with(func(e *events.Event) { e.RawJSON = []byte("\"\xff\"") }), false},
		{"raw_json with an escaped NUL", with(func(e *events.Event) { e.RawJSON = []byte(`{"a":"x\u0000"}`) }), false},
		{"kind with NUL", with(func(e *events.Event) { e.Kind = "a\x00" }), false},
		{"signature not UTF-8", with(func(e *events.Event) { e.Alert.Signature = "\xff" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := events.Validate(tt.ev, now)
			if tt.ok && err != nil {
				t.Errorf("Validate: %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, events.ErrInvalidEvent) {
				t.Errorf("Validate: %v, want ErrInvalidEvent", err)
			}
		})
	}
}

func TestParseAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"", "invalid IP", true},
		{"192.0.2.1", "192.0.2.1", true},
		{"2001:db8::1", "2001:db8::1", true},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1", true},
		{"300.1.1.1", "", false},
		{"fe80::1%eth0", "", false},
		{"192.0.2.1/24", "", false},
		{"host.example", "", false},
	}
	for _, tt := range tests {
		got, err := events.ParseAddr(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseAddr(%q) error %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && got.String() != tt.want {
			t.Errorf("ParseAddr(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if !tt.ok && !errors.Is(err, events.ErrInvalidEvent) {
			t.Errorf("ParseAddr(%q) error %v, want ErrInvalidEvent", tt.in, err)
		}
	}
}

func TestExtractCVEs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		texts []string
		want  []string
	}{
		{"none", []string{"ET SCAN Potential SSH Scan", `{"alert":{}}`}, nil},
		{"empty", nil, nil},
		{"in a signature", []string{"ET EXPLOIT Apache Log4j RCE Attempt (CVE-2021-44228)"}, []string{"CVE-2021-44228"}},
		{"lower case and underscores", []string{`{"metadata":{"cve":["cve_2021_44228","CVE_2017_0144"]}}`}, []string{"CVE-2017-0144", "CVE-2021-44228"}},
		{"de-duplicated across texts", []string{"CVE-2021-44228", `{"cve":"cve-2021-44228"}`}, []string{"CVE-2021-44228"}},
		{"adjacent", []string{"CVE-2020-1111,CVE-2020-2222"}, []string{"CVE-2020-1111", "CVE-2020-2222"}},
		{"seven digits", []string{"CVE-2024-1234567"}, []string{"CVE-2024-1234567"}},
		{"too many digits", []string{"CVE-2024-12345678"}, nil},
		{"too few digits", []string{"CVE-2024-123"}, nil},
		{"inside a word", []string{"XCVE-2021-44228", "CVE-2021-44228X"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, events.ExtractCVEs(tt.texts...)); diff != "" {
				t.Errorf("ExtractCVEs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtractCVEsBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 100 {
		b.WriteString(" CVE-2020-")
		b.WriteString(strings.Repeat("1", 4))
		b.WriteByte(byte('0' + i%10))
		b.WriteByte(byte('0' + i/10))
	}
	if got := events.ExtractCVEs(b.String()); len(got) != 64 {
		t.Errorf("ExtractCVEs kept %d ids, want 64", len(got))
	}
}

func FuzzExtractCVEs(f *testing.F) {
	f.Add("ET EXPLOIT (CVE-2021-44228) cve_2017_0144")
	f.Add(`{"cve":"CVE-2020-1111,CVE-2020-2222"}`)
	f.Fuzz(func(t *testing.T, s string) {
		got := events.ExtractCVEs(s)
		if len(got) > 64 {
			t.Fatalf("%d ids", len(got))
		}
		for i, id := range got {
			if !strings.HasPrefix(id, "CVE-") || strings.ToUpper(id) != id || strings.Contains(id, "_") {
				t.Fatalf("id %q not normalised", id)
			}
			if !strings.Contains(strings.ReplaceAll(strings.ToUpper(s), "_", "-"), id) {
				t.Fatalf("id %q not in the input", id)
			}
			if i > 0 && got[i-1] >= id {
				t.Fatalf("ids not sorted and unique: %q", got)
			}
		}
	})
}

func FuzzValidate(f *testing.F) {
	f.Add("e1", int64(0), "alert", "192.0.2.1", uint32(80), "TCP", "sig", int32(2), []byte(`{"a":1}`))
	f.Add("", int64(-1), "", "::1", uint32(70000), "", "", int32(-1), []byte(`{`))
	f.Fuzz(func(t *testing.T, id string, offset int64, kind, ip string, port uint32, proto, sig string, sev int32, raw []byte) {
		addr, addrErr := events.ParseAddr(ip)
		ev := events.Event{ID: id, Time: now.Add(time.Duration(offset)), Kind: kind, SrcIP: addr, DestPort: port, Protocol: proto,
			Alert: &events.Alert{Signature: sig, Severity: sev}, RawJSON: raw}
		err := events.Validate(ev, now)
		if addrErr != nil && !errors.Is(addrErr, events.ErrInvalidEvent) {
			t.Fatalf("ParseAddr error %v does not wrap ErrInvalidEvent", addrErr)
		}
		if err != nil {
			if !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("Validate error %v does not wrap ErrInvalidEvent", err)
			}
			return
		}
		// What passes is safe to use as a subject token suffix and a row.
		if id == "" || len(id) > events.MaxEventID || strings.ContainsAny(id, " */>\x00") || len(kind) > events.MaxKind ||
			port > 65535 || len(raw) > events.MaxRawJSON || sev < 0 || sev > 255 {
			t.Fatalf("Validate accepted %+v", ev)
		}
	})
}
