package provisioning

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// jwtCache keeps recently served account JWTs so the URL resolver answers
// from memory. An entry is never served more than ttl after it was read
// from the store, which bounds how long a replica can serve a JWT that
// another replica has since replaced; this replica's own writes replace
// its entries at once. Misses are never cached, so an account created
// elsewhere resolves immediately.
//
// An entry asked for in the second half of its life (the point is
// jittered per entry) is read again in the background while it is still
// served: an account nats-server keeps asking for never expires in the
// middle of a request, and the entries filled together at start do not
// all fall back to the store at once (before, they expired together and
// their requests queued for PostgreSQL's few pooled connections: the
// resolver's p99 of tens of milliseconds, issue 22).
type jwtCache struct {
	ttl     time.Duration
	now     Clock
	mu      sync.RWMutex
	entries map[string]*cacheEntry
	// refreshes counts background reads in flight, bounded by
	// maxRefreshes so that they leave the pool to the write routes.
	refreshes atomic.Int32
}

type cacheEntry struct {
	jwt                string
	refreshAt, expires time.Time
	// refreshing is set by the one request that starts the entry's
	// background read (at most one per entry).
	refreshing atomic.Bool
}

// maxCacheEntries caps memory; past it the cache is emptied and refills.
const maxCacheEntries = 100_000

// maxRefreshes bounds the background reads in flight.
const maxRefreshes = 2

func newJWTCache(ttl time.Duration, now Clock) *jwtCache {
	return &jwtCache{ttl: ttl, now: now, entries: map[string]*cacheEntry{}}
}

// get returns the cached JWT, if it is fresh enough to serve, and the
// entry: the caller passes it to put after reading the store, so that a
// newer JWT stored in between is not replaced by an older one. refresh
// is true for the one caller that should read the entry again in the
// background (then call refreshed when done).
func (c *jwtCache) get(pubKey string) (jwt string, e *cacheEntry, ok, refresh bool) {
	if c.ttl <= 0 {
		return "", nil, false, false
	}
	c.mu.RLock()
	e = c.entries[pubKey]
	c.mu.RUnlock()
	if e == nil {
		return "", nil, false, false
	}
	now := c.now()
	if now.After(e.expires) {
		return "", e, false, false
	}
	if now.After(e.refreshAt) && !e.refreshing.Load() && c.refreshes.Load() < maxRefreshes && e.refreshing.CompareAndSwap(false, true) {
		c.refreshes.Add(1)
		refresh = true
	}
	return e.jwt, e, true, refresh
}

// refreshed ends a background read get asked for. A failed one is not
// tried again for the same entry (no stream of reads at a database that
// is down): the entry expires, and the request after that reads the
// store itself (or answers from the last known copy).
func (c *jwtCache) refreshed() { c.refreshes.Add(-1) }

// put stores a JWT read from the store or written to it.
func (c *jwtCache) put(pubKey, jwt string) { c.putIf(pubKey, jwt, nil, false) }

// putIf stores jwt unless the entry changed since prev was looked up
// (conditional): a write of this replica that stored a newer JWT while
// the read was in flight wins.
func (c *jwtCache) putIf(pubKey, jwt string, prev *cacheEntry, conditional bool) {
	if c.ttl <= 0 {
		return
	}
	now := c.now()
	// The refresh point falls between half and three quarters of the
	// lifetime, per entry.
	half := c.ttl / 2
	e := &cacheEntry{jwt: jwt, refreshAt: now.Add(half + time.Duration(rand.Int64N(int64(half/2)+1))), expires: now.Add(c.ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.entries[pubKey]
	if conditional && old != prev {
		return
	}
	if old != nil && old.jwt == jwt {
		// The same JWT read again keeps the string served before, so
		// that comparisons with it downstream (the API's ETag) stay a
		// pointer check rather than a byte comparison per request.
		e.jwt = old.jwt
	}
	if len(c.entries) >= maxCacheEntries {
		c.entries = map[string]*cacheEntry{}
	}
	c.entries[pubKey] = e
}
