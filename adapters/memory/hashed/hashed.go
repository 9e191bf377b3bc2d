// Package hashed holds what the in-memory stores share for records found by
// the hash of a secret (claim codes, API tokens), as the PostgreSQL stores'
// unique indexes on id and hash do: a new record needs an id and a hash no
// other record has, and a record is looked up by its hash. Callers hold
// their store's mutex.
package hashed

import "bytes"

// Taken reports whether a record of m has the key id or a hash (hashOf)
// equal to hash.
func Taken[V any](m map[string]V, id string, hash []byte, hashOf func(V) []byte) bool {
	if _, ok := m[id]; ok {
		return true
	}
	_, ok := Find(m, hash, hashOf)
	return ok
}

// Find returns the record of m whose hash (hashOf) equals hash.
func Find[V any](m map[string]V, hash []byte, hashOf func(V) []byte) (V, bool) {
	for _, v := range m {
		if bytes.Equal(hashOf(v), hash) {
			return v, true
		}
	}
	var zero V
	return zero, false
}
