package fleet

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
)

// Claim codes are 28 Crockford base32 symbols (140 random bits) printed in
// seven dash-separated groups of four, e.g. "7K3M-Q9ZD-...". Crockford's
// alphabet has no I, L, O or U, so a code read aloud or typed from paper
// survives the usual confusions: parsing maps I and L to 1 and O to 0,
// ignores case, dashes and spaces.
const (
	claimCodeSymbols = 28
	claimCodeGroup   = 4
	// maxClaimCodeInput bounds the work done on untrusted input.
	maxClaimCodeInput = 128
	crockford         = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// NewClaimCode returns a fresh code in its display form.
func NewClaimCode() (string, error) {
	var raw [claimCodeSymbols]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("claim code: %w", err)
	}
	var b strings.Builder
	for i, r := range raw {
		if i > 0 && i%claimCodeGroup == 0 {
			b.WriteByte('-')
		}
		// 256 is a multiple of 32, so the low five bits are uniform.
		b.WriteByte(crockford[r&31])
	}
	return b.String(), nil
}

// NormalizeClaimCode returns the canonical form of a code as typed (upper
// case, no separators, I/L→1, O→0), or ErrInvalidClaimCode.
func NormalizeClaimCode(code string) (string, error) {
	if len(code) > maxClaimCodeInput {
		return "", ErrInvalidClaimCode
	}
	out := make([]byte, 0, claimCodeSymbols)
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '-' || c == ' ' || c == '\t':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		switch c {
		case 'I', 'L':
			c = '1'
		case 'O':
			c = '0'
		}
		if strings.IndexByte(crockford, c) < 0 || len(out) == claimCodeSymbols {
			return "", ErrInvalidClaimCode
		}
		out = append(out, c)
	}
	if len(out) != claimCodeSymbols {
		return "", ErrInvalidClaimCode
	}
	return string(out), nil
}

// HashClaimCode returns the SHA-256 of the code's canonical form: the only
// thing ever stored. 140 random bits make a plain hash safe against guessing.
func HashClaimCode(code string) ([]byte, error) {
	n, err := NormalizeClaimCode(code)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(n))
	return sum[:], nil
}
