package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newSealer(t testing.TB) *Sealer {
	t.Helper()
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	s, err := New(key)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestNewKeyLength(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := New(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "exactly 32 bytes") {
			t.Errorf("New(%d-byte key) error = %v, want one saying it must be exactly 32 bytes", n, err)
		}
	}
	if _, err := New(make([]byte, KeySize)); err != nil {
		t.Errorf("New(32-byte key) = %v, want nil", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSealer(t)
	tests := []struct {
		name      string
		plaintext []byte
		aad       []byte
	}{
		{"seed", []byte("SAAJ7UBUKIUDJHWNQAA3WVGJ3AVVMBBBSJGRS5XSKGJF6HCW7VMUKDZUTQ"), []byte("ADKP6LJ3ZAGA6T4XU6DUGH7TQXR3DK4IWDY3LIUCT56PDXDQUWRPIUHC")},
		{"empty plaintext", []byte{}, []byte("aad")},
		{"nil aad", []byte{0, 1, 2, 0, 255}, nil},
		{"binary", bytes.Repeat([]byte{0, 0xff}, 500), []byte{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sealed, err := s.Seal(tc.plaintext, tc.aad)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if len(tc.plaintext) > 4 && bytes.Contains(sealed, tc.plaintext) {
				t.Errorf("sealed value contains the plaintext")
			}
			got, err := s.Open(sealed, tc.aad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if diff := cmp.Diff(tc.plaintext, got, cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("Open(Seal(p)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	s := newSealer(t)
	plain, aad := []byte("SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"), []byte("UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4")
	sealed, err := s.Seal(plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name   string
		sealer *Sealer
		sealed []byte
		aad    []byte
		want   error
	}{
		{"wrong aad", s, sealed, []byte("UOTHER"), ErrOpen},
		{"empty aad", s, sealed, nil, ErrOpen},
		{"wrong key", newSealer(t), sealed, aad, ErrOpen},
		{"tampered version", s, flip(0), aad, ErrMalformed},
		{"tampered nonce", s, flip(1), aad, ErrOpen},
		{"tampered ciphertext", s, flip(1 + nonceSize), aad, ErrOpen},
		{"tampered tag", s, flip(len(sealed) - 1), aad, ErrOpen},
		{"truncated", s, sealed[:len(sealed)-1], aad, ErrOpen},
		{"too short", s, sealed[:1+nonceSize+15], aad, ErrMalformed},
		{"empty", s, nil, aad, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sealer.Open(tc.sealed, tc.aad)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open error = %v, want %v", err, tc.want)
			}
			if got != nil {
				t.Errorf("Open returned %d bytes alongside an error", len(got))
			}
		})
	}
}

func TestSealUsesFreshNonce(t *testing.T) {
	t.Parallel()
	s := newSealer(t)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		sealed, err := s.Seal([]byte("same"), []byte("same"))
		if err != nil {
			t.Fatal(err)
		}
		nonce := string(sealed[1 : 1+nonceSize])
		if seen[nonce] {
			t.Fatalf("nonce repeated after %d seals", i)
		}
		seen[nonce] = true
	}
	a, _ := s.Seal([]byte("same"), nil)
	b, _ := s.Seal([]byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Errorf("two seals of the same value are equal")
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	key := make([]byte, KeySize)
	for i := range key {
		key[i] = byte(i*7 + 0xf9) // covers '+' '/' vs '-' '_' alphabets
	}
	tests := []struct {
		name    string
		in      string
		want    []byte
		wantErr string
	}{
		{"hex lower", hex.EncodeToString(key), key, ""},
		{"hex upper", strings.ToUpper(hex.EncodeToString(key)), key, ""},
		{"std base64", base64.StdEncoding.EncodeToString(key), key, ""},
		{"raw std base64", base64.RawStdEncoding.EncodeToString(key), key, ""},
		{"url base64", base64.URLEncoding.EncodeToString(key), key, ""},
		{"raw url base64", base64.RawURLEncoding.EncodeToString(key), key, ""},
		{"surrounding whitespace", " " + base64.StdEncoding.EncodeToString(key) + "\n", key, ""},
		{"empty", "", nil, "key is empty"},
		{"short base64", base64.StdEncoding.EncodeToString(key[:16]), nil, "decodes to 16 bytes, want 32"},
		{"long base64", base64.StdEncoding.EncodeToString(append(key, key...)), nil, "decodes to 64 bytes, want 32"},
		{"short hex", hex.EncodeToString(key[:31]), nil, "want 32"},
		{"64 chars not hex", strings.Repeat("z", 64), nil, "decodes to 48 bytes, want 32"},
		{"garbage", "not a key!", nil, "neither 64 hex characters nor base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKey(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKey error = %v, want one containing %q", err, tc.wantErr)
				}
				if tc.in != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.in)) {
					t.Errorf("error quotes the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKey: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseKey mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzOpen(f *testing.F) {
	s := newSealer(f)
	good, err := s.Seal([]byte("SAAJ7UBUKIUDJHWNQAA3WVGJ3AVVMBBBSJGRS5XSKGJF6HCW7VMUKDZUTQ"), []byte("A"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, []byte("A"))
	f.Add(good[:20], []byte("A"))
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1}, []byte(nil))
	f.Add(bytes.Repeat([]byte{1}, 29), []byte("x"))
	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		plain, err := s.Open(sealed, aad)
		if err == nil && !bytes.Equal(sealed, good) {
			t.Fatalf("Open accepted a value Seal never produced (%d bytes -> %d bytes)", len(sealed), len(plain))
		}
		if err != nil && plain != nil {
			t.Fatalf("Open returned plaintext with error %v", err)
		}
	})
}

func FuzzParseKey(f *testing.F) {
	f.Add("")
	f.Add(strings.Repeat("ab", 32))
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	f.Add("====")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err == nil && len(k) != KeySize {
			t.Fatalf("ParseKey returned %d bytes without error", len(k))
		}
	})
}
