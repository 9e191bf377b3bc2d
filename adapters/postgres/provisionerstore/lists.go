package provisionerstore

import (
	"slices"
	"strings"
	"sync"

	"github.com/rxc-project/rxc/core/provisioning"
)

// maxIncremental is how many changed entries a revocation applies to the
// list held in memory; a larger change (a re-issue, the revocation of
// every outdated user at start) reads the list again.
const maxIncremental = 64

// maxCachedRevocations bounds the entries held for all accounts together
// (about 100 bytes each): a tenant's list is at most its bound's worth
// (700 entries at the default 64 KiB, 2,800 at 256 KiB), so this holds a
// few hundred full tenants; others are read from the table.
const maxCachedRevocations = 1 << 18

// lists keeps, per account, the revocation list this store last read or
// wrote, with the generation (nats_accounts.revocations_gen) the account
// was at then. A trigger sets a new random generation with every statement
// that changes the account's revocations (random, not counted: a database
// restored from a backup and changed again never comes back to a
// generation this store saw with other contents), so a list whose
// generation is the one found under the account's lock is the table's
// list: a revocation then
// neither reads the account's revocations again nor grows in cost with
// them. Any other generation (another replica, an older release, an
// operator by hand changed the list) reads the list again.
//
// It also holds each account's JWT as this store last signed it, with its
// hash: the account's lock reads the JWT only when the row's jwt_hash is
// another.
type lists struct {
	mu        sync.Mutex
	byAccount map[string]cachedList
	held, max int
	jwts      map[string]heldJWT
	jwtBytes  int
}

type heldJWT struct{ jwt, hash string }

// maxHeldJWTBytes bounds the JWTs held for all accounts together.
const maxHeldJWTBytes = 64 << 20

// jwt returns the account's JWT held and its hash ("" and "" when none).
func (l *lists) jwt(pubKey string) (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.jwts[pubKey]
	return h.jwt, h.hash
}

// putJWT holds jwt, whose hash is hash, as the account's.
func (l *lists) putJWT(pubKey, jwt, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jwtBytes -= len(l.jwts[pubKey].jwt)
	delete(l.jwts, pubKey)
	for other, h := range l.jwts {
		if l.jwtBytes+len(jwt) <= maxHeldJWTBytes {
			break
		}
		l.jwtBytes -= len(h.jwt)
		delete(l.jwts, other)
	}
	if l.jwtBytes+len(jwt) <= maxHeldJWTBytes {
		l.jwts[pubKey] = heldJWT{jwt: jwt, hash: hash}
		l.jwtBytes += len(jwt)
	}
}

type cachedList struct {
	gen string
	all []provisioning.Revocation // sorted by user key, in byte order
}

// get returns a copy of the account's list if it is held at generation gen.
func (l *lists) get(pubKey, gen string) ([]provisioning.Revocation, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.byAccount[pubKey]
	if !ok || gen == "" || c.gen != gen {
		return nil, false
	}
	return slices.Clone(c.all), true
}

// put holds a copy of all as the account's list at generation gen; an
// empty gen (unknown) drops the account's list. Generations are not
// ordered: a put that comes after a later transaction's only costs that
// transaction's successor a read (its generation is another).
func (l *lists) put(pubKey, gen string, all []provisioning.Revocation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.byAccount[pubKey]; ok {
		l.held -= len(c.all)
		delete(l.byAccount, pubKey)
	}
	if gen == "" || len(all) > l.max {
		return
	}
	for other, c := range l.byAccount {
		if l.held+len(all) <= l.max {
			break
		}
		l.held -= len(c.all)
		delete(l.byAccount, other)
	}
	l.byAccount[pubKey] = cachedList{gen: gen, all: slices.Clone(all)}
	l.held += len(all)
}

// applyChanges is base (sorted by user key) with the entries stored
// replacing or joining those of their keys and the deleted keys taken out,
// in the order recordRevocations made the changes: the list the table
// holds after them.
func applyChanges(base, stored []provisioning.Revocation, deleted []string) []provisioning.Revocation {
	all := base
	byKey := func(r provisioning.Revocation, key string) int { return strings.Compare(r.UserPubKey, key) }
	for _, r := range stored {
		if i, found := slices.BinarySearchFunc(all, r.UserPubKey, byKey); found {
			all[i] = r
		} else {
			all = slices.Insert(all, i, r)
		}
	}
	for _, key := range deleted {
		if i, found := slices.BinarySearchFunc(all, key, byKey); found {
			all = slices.Delete(all, i, i+1)
		}
	}
	return all
}
