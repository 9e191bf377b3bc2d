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
// have refilled completely are dropped; if none has, new addresses are
// refused until one does (redemption is rare, so failing closed is cheap).
const maxBuckets = 1 << 16

// limiter is a token bucket per key.
type limiter struct {
	mu        sync.Mutex
	perSecond float64
	burst     float64
	buckets   map[string]*bucket
	lastPrune time.Time
	clock     func() time.Time
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
		if len(l.buckets) >= maxBuckets && !l.prune(now) {
			return false, time.Minute
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
	return len(l.buckets) < maxBuckets
}

// clientKey is the address a request is rate limited by: the peer, or with
// trustProxy the last X-Forwarded-For entry (the address the trusted proxy
// saw; earlier entries are the client's to forge). IPv6 addresses count per
// /64, the block one subscriber usually holds.
func clientKey(r *http.Request, trustProxy bool) string {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	if trustProxy {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			last := xff[len(xff)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				addr = last
			}
		}
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
