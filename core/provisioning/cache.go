package provisioning

import (
	"sync"
	"time"
)

// jwtCache keeps recently served account JWTs so the URL resolver answers
// from memory. Entries expire after ttl, which bounds how long a replica can
// serve a JWT that another replica has since replaced; this replica's own
// writes replace its entries at once. Misses are never cached, so an account
// created elsewhere resolves immediately.
type jwtCache struct {
	ttl     time.Duration
	now     Clock
	mu      sync.RWMutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	jwt     string
	expires time.Time
}

// maxCacheEntries caps memory; past it the cache is emptied and refills.
const maxCacheEntries = 100_000

func newJWTCache(ttl time.Duration, now Clock) *jwtCache {
	return &jwtCache{ttl: ttl, now: now, entries: map[string]cacheEntry{}}
}

func (c *jwtCache) get(pubKey string) (string, bool) {
	if c.ttl <= 0 {
		return "", false
	}
	c.mu.RLock()
	e, ok := c.entries[pubKey]
	c.mu.RUnlock()
	if !ok || c.now().After(e.expires) {
		return "", false
	}
	return e.jwt, true
}

func (c *jwtCache) put(pubKey, jwt string) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	if len(c.entries) >= maxCacheEntries {
		c.entries = map[string]cacheEntry{}
	}
	c.entries[pubKey] = cacheEntry{jwt: jwt, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
}
