package controlapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// maxBuckets bounds the limiter's memory. When it is full, buckets that
// have refilled completely are dropped; if none has, the fullest of a few
// buckets picked at random makes room. Refusing new addresses instead
// would let whoever holds maxBuckets addresses (a few IPv6 /48s) shut
// everyone else out; evicting gives such a caller nothing it did not
// already have (each of its addresses starts with a full bucket anyway),
// while a drained address is evicted only if every sampled one is as
// drained.
const maxBuckets = 1 << 16

// evictSample is how many buckets are looked at to choose one to evict.
const evictSample = 8

// limiter is a token bucket per key.
type limiter struct {
	mu        sync.Mutex
	perSecond float64
	burst     float64
	buckets   map[string]*bucket
	lastPrune time.Time
	clock     func() time.Time
	max       int // buckets kept at most; 0 means maxBuckets (tests set less)
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rl RateLimit, clock func() time.Time) *limiter {
	return &limiter{
		perSecond: float64(rl.PerMinute) / 60,
		burst:     float64(rl.Burst),
		buckets:   make(map[string]*bucket),
		clock:     clock,
	}
}

// allow takes a token for key, or says how long until one is available.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.capacity() && !l.prune(now) {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.perSecond * float64(time.Second))
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.perSecond)
		b.at = now
	}
}

// prune drops full buckets, at most once a second, and reports whether
// there is room afterwards.
func (l *limiter) prune(now time.Time) bool {
	if now.Sub(l.lastPrune) >= time.Second {
		l.lastPrune = now
		for k, b := range l.buckets {
			if l.refill(b, now); b.tokens >= l.burst {
				delete(l.buckets, k)
			}
		}
	}
	return len(l.buckets) < l.capacity()
}

// evict drops the fullest of evictSample buckets (map order is random).
func (l *limiter) evict(now time.Time) {
	victim, best, n := "", -1.0, 0
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens > best {
			victim, best = k, b.tokens
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(l.buckets, victim)
}

func (l *limiter) capacity() int {
	if l.max > 0 {
		return l.max
	}
	return maxBuckets
}

// proxyTrust says when X-Forwarded-For is believed.
type proxyTrust struct {
	// any believes the last entry from every peer (TrustProxy without
	// TrustedProxies: the peer must be the proxy, by the network's design).
	any bool
	// nets are the proxies' addresses: the header is believed only from a
	// peer in them, and entries in them are skipped from the right.
	nets []netip.Prefix
}

func (p proxyTrust) trusted(ip netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// parseIP parses an address, with or without a port, unmapping IPv4 in IPv6.
func parseIP(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	ip, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// forwardedFor returns the X-Forwarded-For entries, leftmost first.
func forwardedFor(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, e := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(e))
		}
	}
	return out
}

// clientKey is the address a request is rate limited and throttled by, and
// that the audit trail records. Without trust it is the peer. With trusted
// proxy networks, and a peer in them, it is the rightmost X-Forwarded-For
// entry that is not itself a trusted proxy (each proxy appends the address
// it saw; entries further left are the client's to forge); an unparsable
// entry there ends the walk at the last trusted hop. With TrustProxy alone
// it is the last entry from any peer. IPv6 addresses count per /64, the
// block one subscriber usually holds.
func clientKey(r *http.Request, trust proxyTrust) string {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	switch {
	case len(trust.nets) > 0:
		peer, ok := parseIP(addr)
		if !ok || !trust.trusted(peer) {
			break
		}
		xff := forwardedFor(r)
		for i := len(xff) - 1; i >= 0; i-- {
			ip, ok := parseIP(xff[i])
			if !ok {
				break
			}
			addr = ip.String()
			if !trust.trusted(ip) {
				break
			}
		}
	case trust.any:
		if xff := forwardedFor(r); len(xff) > 0 && xff[len(xff)-1] != "" {
			addr = xff[len(xff)-1]
		}
	}
	ip, ok := parseIP(addr)
	if !ok {
		return addr
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
