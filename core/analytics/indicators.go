package analytics

import (
	"net/netip"
	"slices"
	"strings"
)

// MaxIndicators bounds the lookups one question can cause.
const MaxIndicators = 32

// Indicators are the addresses and CVE ids found in a text.
type Indicators struct {
	Addrs []netip.Addr
	CVEs  []string
}

// Empty reports whether nothing was found.
func (in Indicators) Empty() bool { return len(in.Addrs) == 0 && len(in.CVEs) == 0 }

// Strings lists every indicator as text, addresses first.
func (in Indicators) Strings() []string {
	out := make([]string, 0, len(in.Addrs)+len(in.CVEs))
	for _, a := range in.Addrs {
		out = append(out, a.String())
	}
	return append(out, in.CVEs...)
}

// ExtractIndicators finds IPv4 and IPv6 addresses and CVE ids
// (CVE-YYYY-NNNN…) in texts, in order of appearance, without duplicates and
// at most MaxIndicators. Addresses that say nothing about the outside world
// (private, loopback, link-local, multicast, unspecified and documentation
// ranges) are skipped unless includePrivate.
func ExtractIndicators(includePrivate bool, texts ...string) Indicators {
	var in Indicators
	seen := map[string]bool{}
	add := func(key string, fn func()) {
		if seen[key] || len(seen) >= MaxIndicators {
			return
		}
		seen[key] = true
		fn()
	}
	for _, text := range texts {
		for _, tok := range tokens(text) {
			if id, ok := cveID(tok); ok {
				add(id, func() { in.CVEs = append(in.CVEs, id) })
				continue
			}
			a, ok := addr(tok)
			if !ok {
				continue
			}
			a = a.Unmap()
			if !includePrivate && !Public(a) {
				continue
			}
			add(a.String(), func() { in.Addrs = append(in.Addrs, a) })
		}
	}
	return in
}

// addr parses an address, also with a port or trailing punctuation.
func addr(tok string) (netip.Addr, bool) {
	tok = strings.TrimRight(tok, ".-")
	a, err := netip.ParseAddr(tok)
	if err != nil {
		a, err = netip.ParseAddr(strings.TrimRight(tok, ":"))
	}
	if err != nil {
		ap, perr := netip.ParseAddrPort(tok)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a, a.Zone() == ""
}

// tokens splits text into runs of characters that can form an address or
// a CVE id.
func tokens(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		alnum := r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		return !alnum && r != '.' && r != ':' && r != '-'
	})
}

// cveID recognises CVE-YYYY-NNNN (four or more digits), in any case and
// with trailing punctuation, and returns it in upper case.
func cveID(tok string) (string, bool) {
	tok = strings.TrimRight(tok, ".:-")
	if len(tok) < 13 || !strings.EqualFold(tok[:4], "CVE-") || tok[8] != '-' {
		return "", false
	}
	if !allDigits(tok[4:8]) || !allDigits(tok[9:]) || len(tok[9:]) > 7 {
		return "", false
	}
	return strings.ToUpper(tok), true
}

func allDigits(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
}

// nonPublic are the ranges ExtractIndicators skips by default beside what
// netip classifies: documentation, shared address space and benchmarking.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("3fff::/20"),
}

// Public reports whether a is a global unicast address outside the
// private, shared, documentation and benchmarking ranges.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	return !slices.ContainsFunc(nonPublic, func(p netip.Prefix) bool { return p.Contains(a) })
}
