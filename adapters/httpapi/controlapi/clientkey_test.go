package controlapi

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientKey: X-Forwarded-For is believed only from a trusted proxy,
// and then only up to the first hop that is not a trusted proxy; a client
// cannot choose its address by writing entries to the left.
func TestClientKey(t *testing.T) {
	t.Parallel()
	proxies := proxyTrust{nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	tests := []struct {
		name  string
		peer  string
		xff   []string
		trust proxyTrust
		want  string
	}{
		{"no trust: the peer", "192.0.2.1:5000", []string{"198.51.100.7"}, proxyTrust{}, "192.0.2.1"},
		{"legacy trust: the last entry", "192.0.2.1:5000", []string{"198.51.100.7, 203.0.113.9"}, proxyTrust{any: true}, "203.0.113.9"},
		{"trusted peer: the entry it appended", "10.1.2.3:5000", []string{"198.51.100.7, 203.0.113.9"}, proxies, "203.0.113.9"},
		{"untrusted peer: its forged header is ignored", "192.0.2.1:5000", []string{"203.0.113.9"}, proxies, "192.0.2.1"},
		{"a chain of trusted proxies is skipped", "10.1.2.3:5000", []string{"6.6.6.6, 203.0.113.9, 10.9.9.9", "10.8.8.8"}, proxies, "203.0.113.9"},
		{"a garbage entry stops at the last trusted hop", "10.1.2.3:5000", []string{"203.0.113.9, not-an-ip"}, proxies, "10.1.2.3"},
		{"only trusted hops: the leftmost", "10.1.2.3:5000", []string{"10.4.4.4"}, proxies, "10.4.4.4"},
		{"trusted peer without the header", "10.1.2.3:5000", nil, proxies, "10.1.2.3"},
		{"IPv6 counts per /64", "[2001:db8:1:2:3:4:5:6]:5000", nil, proxies, "2001:db8:1:2::/64"},
		{"IPv4-mapped peer in a trusted network", "[::ffff:10.1.2.3]:5000", []string{"203.0.113.9"}, proxies, "203.0.113.9"},
		{"entry with a port", "10.1.2.3:5000", []string{"203.0.113.9:4444"}, proxies, "203.0.113.9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientKey(r, tc.trust); got != tc.want {
				t.Errorf("clientKey = %q, want %q", got, tc.want)
			}
		})
	}
}
