package analytics

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExtractIndicators(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		includePrivate bool
		text           string
		want           []string
	}{
		{"public IPv4 and IPv6, with ports and punctuation", false, "from 45.33.32.156:443, then [2a00:1450:4001:82a::200e]. and 8.8.8.8.", []string{"45.33.32.156", "2a00:1450:4001:82a::200e", "8.8.8.8"}},
		{"private, loopback, link-local, multicast, documentation skipped", false,
			"10.1.2.3 172.16.0.1 192.168.1.1 127.0.0.1 169.254.1.1 224.0.0.1 192.0.2.1 198.51.100.2 203.0.113.3 100.64.0.1 ::1 fe80::1 ff02::1 2001:db8::1 fd00::1", nil},
		{"private kept on request", true, "10.1.2.3 and 192.0.2.1", []string{"10.1.2.3", "192.0.2.1"}},
		{"CVE ids in any case, deduplicated", false, "cve-2021-44228, CVE-2021-44228 and CVE-2023-1234567.", []string{"CVE-2021-44228", "CVE-2023-1234567"}},
		{"not CVE ids", false, "CVE-21-1234 CVE-2021-123 CVE-2021-12345678 XCVE-2021-1234", nil},
		{"not addresses", false, "1.2.3 999.1.1.1 1.2.3.4.5 v1.2.3.4", nil},
		{"IPv4-mapped IPv6 becomes IPv4", false, "::ffff:45.33.32.156", []string{"45.33.32.156"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ExtractIndicators(tc.includePrivate, tc.text).Strings()
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var many strings.Builder
	for i := range 100 {
		many.WriteString("CVE-2024-1" + strings.Repeat("0", 3) + string(rune('0'+i%10)) + string(rune('0'+i/10)) + " ")
	}
	if n := len(ExtractIndicators(false, many.String()).Strings()); n != MaxIndicators {
		t.Errorf("%d indicators from 100; want at most %d", n, MaxIndicators)
	}
}

func FuzzExtractIndicators(f *testing.F) {
	f.Add("45.33.32.156 CVE-2021-44228 [2a00:1450::1]:443")
	f.Fuzz(func(t *testing.T, s string) {
		in := ExtractIndicators(false, s)
		if len(in.Addrs)+len(in.CVEs) > MaxIndicators {
			t.Fatalf("%d indicators", len(in.Addrs)+len(in.CVEs))
		}
		for _, a := range in.Addrs {
			if !Public(a) {
				t.Fatalf("non-public %s extracted", a)
			}
		}
		for _, c := range in.CVEs {
			if _, ok := cveID(c); !ok {
				t.Fatalf("bad CVE id %q", c)
			}
		}
	})
}

func TestQueryValidation(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		q    Query
		ok   bool
	}{
		{"defaults", Query{TenantID: "acme", From: from, To: from.Add(time.Hour)}, true},
		{"31 days", Query{TenantID: "acme", From: from, To: from.Add(MaxRange), Limit: 100}, true},
		{"over 31 days", Query{TenantID: "acme", From: from, To: from.Add(MaxRange + time.Second)}, false},
		{"empty range", Query{TenantID: "acme", From: from, To: from}, false},
		{"no tenant", Query{From: from, To: from.Add(time.Hour)}, false},
		{"bad sensor", Query{TenantID: "acme", SensorID: "a b", From: from, To: from.Add(time.Hour)}, false},
		{"limit 101", Query{TenantID: "acme", From: from, To: from.Add(time.Hour), Limit: 101}, false},
		{"negative limit", Query{TenantID: "acme", From: from, To: from.Add(time.Hour), Limit: -1}, false},
	}
	for _, tc := range tests {
		err := tc.q.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidInput)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestBucketFor(t *testing.T) {
	t.Parallel()
	for r, want := range map[time.Duration]time.Duration{
		time.Hour: time.Minute, 6 * time.Hour: time.Minute, 24 * time.Hour: 5 * time.Minute,
		7 * 24 * time.Hour: time.Hour, 30 * 24 * time.Hour: 24 * time.Hour,
	} {
		if got := BucketFor(r); got != want {
			t.Errorf("BucketFor(%s) = %s; want %s", r, got, want)
		}
	}
}

type pingCounter struct {
	calls atomic.Int32
	err   atomic.Pointer[error]
}

func (p *pingCounter) Ping(context.Context) error {
	p.calls.Add(1)
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *pingCounter) Stream(context.Context, string, []Message, func(string) error) error {
	return nil
}

type noEvents struct{}

func (noEvents) Overview(context.Context, Query, time.Duration) (Overview, error) {
	return Overview{}, nil
}
func (noEvents) History(context.Context, string, []netip.Addr, []string) ([]Sighting, error) {
	return nil, nil
}
func (noEvents) EventsStored(context.Context) (bool, error) { return true, nil }

// TestStatusIsCached: the provider is asked at most once per TTL, and a
// provider that goes down turns the chat off after the TTL.
func TestStatusIsCached(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	p := &pingCounter{}
	svc, err := New(Config{Events: noEvents{}, ChatEnabled: true, Model: "m", Provider: p, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		if !svc.ChatStatus(ctx).Enabled {
			t.Fatal("chat disabled with a reachable provider")
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("%d provider checks within the TTL; want 1", n)
	}
	down := errors.New("connection refused")
	p.err.Store(&down)
	now = now.Add(DefaultStatusTTL - time.Second)
	if !svc.ChatStatus(ctx).Enabled {
		t.Error("the cached verdict expired early")
	}
	now = now.Add(2 * time.Second)
	if svc.ChatStatus(ctx).Enabled {
		t.Error("chat still enabled after the provider went down and the TTL passed")
	}
	if n := p.calls.Load(); n != 2 {
		t.Errorf("%d provider checks; want 2", n)
	}
}

func TestFillSeries(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 21, 9, 0, 30, 0, time.UTC)
	got := fillSeries(from, from.Add(3*time.Minute), time.Minute, []Point{{T: from.Truncate(time.Minute).Add(time.Minute), Events: 4, Alerts: 1}})
	want := []Point{
		{T: from.Truncate(time.Minute)},
		{T: from.Truncate(time.Minute).Add(time.Minute), Events: 4, Alerts: 1},
		{T: from.Truncate(time.Minute).Add(2 * time.Minute)},
		{T: from.Truncate(time.Minute).Add(3 * time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
