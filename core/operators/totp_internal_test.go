package operators

import (
	"net/url"
	"testing"
	"time"
)

// TestTOTPRFC6238Vectors: the SHA-1 test vectors of RFC 6238 Appendix B
// (eight digits, seed "12345678901234567890").
func TestTOTPRFC6238Vectors(t *testing.T) {
	t.Parallel()
	key := []byte("12345678901234567890")
	tests := []struct {
		unix int64
		want string
	}{
		{59, "94287082"},
		{1111111109, "07081804"},
		{1111111111, "14050471"},
		{1234567890, "89005924"},
		{2000000000, "69279037"},
		{20000000000, "65353130"},
	}
	for _, tc := range tests {
		if got := hotp(key, totpStepAt(time.Unix(tc.unix, 0)), 8); got != tc.want {
			t.Errorf("TOTP at %d = %s, want %s", tc.unix, got, tc.want)
		}
	}
}

func TestMatchTOTP(t *testing.T) {
	t.Parallel()
	key := []byte("12345678901234567890")
	now := time.Unix(1111111111, 0)
	at := totpStepAt(now)
	for d := int64(-1); d <= 1; d++ {
		if step, ok := matchTOTP(key, hotp(key, at+d, 6), now); !ok || step != at+d {
			t.Errorf("code of step %+d: step %d ok %v, want %d", d, step, ok, at+d)
		}
	}
	for _, d := range []int64{-2, 2, 100} {
		if _, ok := matchTOTP(key, hotp(key, at+d, 6), now); ok {
			t.Errorf("code of step %+d accepted, want only ±1", d)
		}
	}
	for _, bad := range []string{"", "12345", "1234567", "abcdef", hotp(key, at, 8)} {
		if _, ok := matchTOTP(key, bad, now); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestOTPAuthURL(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(otpauthURL("RXC", "ada@example.com", "JBSWY3DPEHPK3PXP"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "otpauth" || u.Host != "totp" || u.Path != "/RXC:ada@example.com" {
		t.Errorf("URL %s: want otpauth://totp/RXC:ada@example.com", u)
	}
	q := u.Query()
	if q.Get("secret") != "JBSWY3DPEHPK3PXP" || q.Get("issuer") != "RXC" || q.Get("digits") != "6" || q.Get("period") != "30" {
		t.Errorf("query %v", q)
	}
}
