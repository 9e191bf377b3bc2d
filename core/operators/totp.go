package operators

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // RFC 6238's default HMAC, the one authenticator apps implement
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// TOTP parameters (RFC 6238 with the defaults every authenticator app
// understands): HMAC-SHA-1, 30-second steps, six digits, and one step of
// clock drift accepted either way.
const (
	totpStep       = 30 * time.Second
	totpDigits     = 6
	totpSkew       = 1
	totpSecretSize = 20 // bytes, RFC 4226's recommended 160 bits
)

// totpEncoding is how secrets are shown: base32 without padding (RFC 4648),
// as otpauth:// URLs and authenticator apps expect.
var totpEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// totpStepAt is the RFC 6238 time step T of t.
func totpStepAt(t time.Time) int64 { return t.Unix() / int64(totpStep/time.Second) }

// hotp is RFC 4226's HOTP value of counter under key with digits digits.
func hotp(key []byte, counter int64, digits int) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(counter))
	mac := hmac.New(sha1.New, key)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	bin := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	return fmt.Sprintf("%0*d", digits, bin%mod)
}

// matchTOTP returns the step within the allowed drift around now whose code
// is code, comparing in constant time; ok is false when none is.
func matchTOTP(key []byte, code string, now time.Time) (step int64, ok bool) {
	code = strings.ReplaceAll(strings.TrimSpace(code), " ", "")
	if len(code) != totpDigits {
		return 0, false
	}
	at := totpStepAt(now)
	found := int64(-1)
	for d := -totpSkew; d <= totpSkew; d++ {
		if subtle.ConstantTimeCompare([]byte(hotp(key, at+int64(d), totpDigits)), []byte(code)) == 1 && found < 0 {
			found = at + int64(d)
		}
	}
	return found, found >= 0
}

// otpauthURL is the Key URI Format authenticator apps scan
// (otpauth://totp/Issuer:account?secret=…&issuer=…).
func otpauthURL(issuer, account, secret string) string {
	q := url.Values{}
	q.Set("secret", secret)
	q.Set("issuer", issuer)
	q.Set("algorithm", "SHA1")
	q.Set("digits", fmt.Sprint(totpDigits))
	q.Set("period", fmt.Sprint(int(totpStep/time.Second)))
	u := url.URL{Scheme: "otpauth", Host: "totp", Path: "/" + issuer + ":" + account, RawQuery: q.Encode()}
	return u.String()
}

// TOTPCode is the six-digit code of a base32 secret at t, as an
// authenticator app shows it (for scripts and tests that sign in).
func TOTPCode(secret string, t time.Time) (string, error) {
	key, err := totpEncoding.DecodeString(strings.ToUpper(strings.TrimSpace(secret)))
	if err != nil {
		return "", fmt.Errorf("%w: TOTP secret is not base32", ErrInvalidInput)
	}
	return hotp(key, totpStepAt(t), totpDigits), nil
}
