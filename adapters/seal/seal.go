// Package seal encrypts small secrets (NATS account and user seeds) for
// storage with AES-256-GCM. Each sealed value is a version byte, a fresh
// random 96-bit nonce and the ciphertext with its tag; the caller's
// additional data (a record's public key) binds the value to its row, so a
// sealed seed copied to another row does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the key length in bytes (AES-256).
const KeySize = 32

// version1 marks AES-256-GCM with a 12-byte random nonce. The version byte is
// also authenticated, so it cannot be swapped for another scheme's.
const version1 byte = 1

const nonceSize = 12

// Errors returned by Open. Neither reveals anything about the key.
var (
	ErrMalformed = errors.New("seal: malformed sealed value")
	ErrOpen      = errors.New("seal: message authentication failed (wrong key, wrong additional data or tampered value)")
)

// Sealer seals and opens values with one key. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: key must be exactly %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// ParseKey decodes a 32-byte key written as 64 hex characters or as base64
// (standard or URL alphabet, padded or not). The error never quotes the input.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("seal: key is empty: want 32 bytes as 64 hex characters or base64 (e.g. the output of `openssl rand -base64 32`)")
	}
	if len(s) == 2*KeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	decoded := -1
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		k, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(k) == KeySize {
			return k, nil
		}
		decoded = len(k)
	}
	if decoded >= 0 {
		return nil, fmt.Errorf("seal: key decodes to %d bytes, want %d (64 hex characters or 44 base64 characters)", decoded, KeySize)
	}
	return nil, fmt.Errorf("seal: key of %d characters is neither 64 hex characters nor base64 of %d bytes", len(s), KeySize)
}

// Seal encrypts plaintext, authenticating aad with it. Every call uses a
// fresh random nonce, so sealing the same value twice gives different output.
func (s *Sealer) Seal(plaintext, aad []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plaintext)+s.aead.Overhead())
	out[0] = version1
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return s.aead.Seal(out, out[1:], plaintext, associated(aad)), nil
}

// Open decrypts a value made by Seal with the same key and aad.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < 1+nonceSize+s.aead.Overhead() {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(sealed))
	}
	if sealed[0] != version1 {
		return nil, fmt.Errorf("%w: unknown version %d", ErrMalformed, sealed[0])
	}
	plain, err := s.aead.Open(nil, sealed[1:1+nonceSize], sealed[1+nonceSize:], associated(aad))
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

func associated(aad []byte) []byte {
	return append([]byte{version1}, aad...)
}
