package fleet

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// tokenBytes is the entropy of enrolment and sensor tokens.
const tokenBytes = 32

// newToken returns a random bearer token and the SHA-256 that is stored.
func newToken() (token string, hash []byte, err error) {
	var raw [tokenBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, fmt.Errorf("token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	return token, hashToken(token), nil
}

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// tokenMatches compares a presented token with a stored hash in constant time.
func tokenMatches(token string, stored []byte) bool {
	return len(stored) == sha256.Size && subtle.ConstantTimeCompare(hashToken(token), stored) == 1
}

// newSensorID returns "s-" and 16 hex digits: valid per package ids.
func newSensorID() (string, error) {
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("sensor id: %w", err)
	}
	return "s-" + hex.EncodeToString(raw[:]), nil
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
