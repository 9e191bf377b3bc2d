package passwords

import (
	"errors"
	"strings"
	"testing"
)

// knownAnswer is the reference implementation's argon2id test vector
// (password "password", salt "somesalt", m=256, t=2, p=1).
const knownAnswer = "$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4"

func testHasher(t *testing.T) *Hasher {
	t.Helper()
	h, err := New(Config{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHashMatchesReferenceVector(t *testing.T) {
	t.Parallel()
	h, err := New(Config{MemoryKiB: 256, Time: 2, Threads: 1, SaltLen: 8, Rand: strings.NewReader("somesalt")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Hash("password")
	if err != nil {
		t.Fatal(err)
	}
	if got != knownAnswer {
		t.Errorf("Hash = %s, want %s", got, knownAnswer)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	h := testHasher(t)
	fresh, err := h.Hash("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		hash     string
		password string
		want     bool
	}{
		{"reference vector", knownAnswer, "password", true},
		{"reference vector, wrong password", knownAnswer, "Password", false},
		{"own hash", fresh, "correct horse battery staple", true},
		{"own hash, wrong password", fresh, "correct horse battery stapl", false},
		{"own hash, empty password", fresh, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := h.Verify(tt.hash, tt.password)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != tt.want {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHashUsesFreshSalt(t *testing.T) {
	t.Parallel()
	h := testHasher(t)
	a, _ := h.Hash("same password here")
	b, _ := h.Hash("same password here")
	if a == b {
		t.Errorf("two hashes of one password are equal: %s", a)
	}
	if !strings.HasPrefix(a, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Errorf("hash %s does not carry its parameters in PHC form", a)
	}
}

func TestVerifyRejectsMalformed(t *testing.T) {
	t.Parallel()
	h := testHasher(t)
	for name, hash := range map[string]string{
		"empty":           "",
		"bcrypt":          "$2a$10$abcdefghijklmnopqrstuv",
		"argon2i":         strings.Replace(knownAnswer, "argon2id", "argon2i", 1),
		"old version":     strings.Replace(knownAnswer, "v=19", "v=16", 1),
		"huge memory":     strings.Replace(knownAnswer, "m=256", "m=99999999", 1),
		"zero time":       strings.Replace(knownAnswer, "t=2", "t=0", 1),
		"params reorder":  strings.Replace(knownAnswer, "m=256,t=2", "t=2,m=256", 1),
		"bad salt base64": strings.Replace(knownAnswer, "c29tZXNhbHQ", "c29t*XNhbHQ", 1),
		"short key":       "$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgL",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ok, err := h.Verify(hash, "password")
			if !errors.Is(err, ErrMalformedHash) || ok {
				t.Errorf("Verify = %v, %v; want false, ErrMalformedHash", ok, err)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(knownAnswer, "password")
	f.Add("$argon2id$v=19$m=8,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "x")
	h, err := New(Config{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, hash, password string) {
		ok, err := h.Verify(hash, password)
		if err != nil && ok {
			t.Fatalf("Verify returned true with error %v", err)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"short salt":  {SaltLen: 4},
		"short key":   {KeyLen: 8},
		"huge memory": {MemoryKiB: 1 << 30},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
