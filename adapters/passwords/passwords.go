// Package passwords hashes operator passwords with argon2id and stores them
// in the PHC string format ($argon2id$v=19$m=…,t=…,p=…$salt$hash, unpadded
// standard base64), so the parameters travel with each hash and can be
// raised later without invalidating existing ones. It implements
// operators.PasswordHasher.
package passwords

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Defaults follow the OWASP recommendation for argon2id (19 MiB, 2 passes, 1 lane).
const (
	DefaultMemoryKiB = 19 * 1024
	DefaultTime      = 2
	DefaultThreads   = 1
	DefaultSaltLen   = 16
	DefaultKeyLen    = 32
)

// Bounds on parameters read back from a stored hash, so a tampered row
// cannot make verification allocate gigabytes.
const (
	maxMemoryKiB = 256 << 10
	maxTime      = 10
	maxThreads   = 16
	maxKeyLen    = 128
	maxSaltLen   = 64
)

// ErrMalformedHash is returned by Verify for a hash it cannot parse.
var ErrMalformedHash = errors.New("malformed argon2id hash")

// Config sets the cost of new hashes; zero values take the defaults. Tests
// use tiny values.
type Config struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
	SaltLen   int
	KeyLen    uint32
	// Rand is the salt source (crypto/rand when nil).
	Rand io.Reader
}

// Hasher hashes and verifies passwords.
type Hasher struct {
	p    params
	rand io.Reader
}

type params struct {
	memory  uint32
	time    uint32
	threads uint8
	keyLen  uint32
	saltLen int
}

// New checks cfg and returns a Hasher.
func New(cfg Config) (*Hasher, error) {
	p := params{memory: cfg.MemoryKiB, time: cfg.Time, threads: cfg.Threads, keyLen: cfg.KeyLen, saltLen: cfg.SaltLen}
	if p.memory == 0 {
		p.memory = DefaultMemoryKiB
	}
	if p.time == 0 {
		p.time = DefaultTime
	}
	if p.threads == 0 {
		p.threads = DefaultThreads
	}
	if p.keyLen == 0 {
		p.keyLen = DefaultKeyLen
	}
	if p.saltLen == 0 {
		p.saltLen = DefaultSaltLen
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("passwords: %w", err)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	return &Hasher{p: p, rand: cfg.Rand}, nil
}

func (p params) check() error {
	switch {
	case p.memory < 8*uint32(p.threads) || p.memory > maxMemoryKiB:
		return fmt.Errorf("memory %d KiB out of range", p.memory)
	case p.time < 1 || p.time > maxTime:
		return fmt.Errorf("time %d out of range", p.time)
	case p.threads < 1 || p.threads > maxThreads:
		return fmt.Errorf("threads %d out of range", p.threads)
	case p.keyLen < 16 || p.keyLen > maxKeyLen:
		return fmt.Errorf("key length %d out of range", p.keyLen)
	case p.saltLen < 8 || p.saltLen > maxSaltLen:
		return fmt.Errorf("salt length %d out of range", p.saltLen)
	}
	return nil
}

// Hash returns the PHC string of password with a fresh random salt.
func (h *Hasher) Hash(password string) (string, error) {
	salt := make([]byte, h.p.saltLen)
	if _, err := io.ReadFull(h.rand, salt); err != nil {
		return "", fmt.Errorf("passwords: salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, h.p.time, h.p.memory, h.p.threads, h.p.keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, h.p.memory, h.p.time, h.p.threads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Verify reports whether password matches hash, comparing in constant time
// with the parameters stored in the hash.
func (h *Hasher) Verify(hash, password string) (bool, error) {
	p, salt, want, err := parse(hash)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, p.keyLen)
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

func parse(hash string) (params, []byte, []byte, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return params{}, nil, nil, ErrMalformedHash
	}
	var p params
	for i, kv := range strings.Split(parts[3], ",") {
		name, value, ok := strings.Cut(kv, "=")
		want := [...]string{"m", "t", "p"}
		if !ok || i >= len(want) || name != want[i] {
			return params{}, nil, nil, ErrMalformedHash
		}
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return params{}, nil, nil, ErrMalformedHash
		}
		switch name {
		case "m":
			p.memory = uint32(n)
		case "t":
			p.time = uint32(n)
		case "p":
			if n > maxThreads {
				return params{}, nil, nil, ErrMalformedHash
			}
			p.threads = uint8(n)
		}
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return params{}, nil, nil, ErrMalformedHash
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil {
		return params{}, nil, nil, ErrMalformedHash
	}
	p.saltLen, p.keyLen = len(salt), uint32(len(key))
	if err := p.check(); err != nil {
		return params{}, nil, nil, fmt.Errorf("%w: %v", ErrMalformedHash, err)
	}
	return p, salt, key, nil
}
