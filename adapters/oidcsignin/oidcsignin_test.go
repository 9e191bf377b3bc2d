package oidcsignin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAttemptCookieRoundTrip(t *testing.T) {
	t.Parallel()
	a := Attempt{State: random(), Nonce: random(), Verifier: "v-" + random()}
	got, ok := DecodeAttempt(EncodeAttempt(a))
	if !ok || got != a {
		t.Fatalf("DecodeAttempt(EncodeAttempt(a)) = %+v, %v; want %+v", got, ok, a)
	}
	for _, bad := range []string{"", "a.b", "a..c", ".b.c", "a.b.", "a.b.c.d", string(make([]byte, 600))} {
		if _, ok := DecodeAttempt(bad); ok {
			t.Errorf("DecodeAttempt(%q) accepted", bad)
		}
	}
}

func FuzzDecodeAttempt(f *testing.F) {
	f.Add("s.n.v")
	f.Add("..")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := DecodeAttempt(s)
		if ok && EncodeAttempt(a) != s {
			t.Errorf("DecodeAttempt(%q) = %+v, which encodes differently", s, a)
		}
	})
}

func TestStringsOf(t *testing.T) {
	t.Parallel()
	if d := cmp.Diff([]string{"a", "c"}, stringsOf([]any{"a", 7, "c"})); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]string{"solo"}, stringsOf("solo")); d != "" {
		t.Error(d)
	}
	if got := stringsOf(map[string]any{"x": 1}); got != nil {
		t.Errorf("stringsOf(object) = %v", got)
	}
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	ok := Config{IssuerURL: "https://idp.example", ClientID: "rxc", RedirectURL: "https://rxc.example/cb"}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"no issuer":       {ClientID: "rxc", RedirectURL: "https://rxc.example/cb"},
		"no client":       {IssuerURL: "https://idp.example", RedirectURL: "https://rxc.example/cb"},
		"no redirect":     {IssuerURL: "https://idp.example", ClientID: "rxc"},
		"no openid scope": {IssuerURL: "https://idp.example", ClientID: "rxc", RedirectURL: "https://rxc.example/cb", Scopes: []string{"email"}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestAttackEmailVerifiedNotABoolean: a provider that sends
// email_verified as the string "false" (or null, or a number) has not
// verified the address; only an absent claim, true or "true" count as
// verified.
func TestAttackEmailVerifiedNotABoolean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		claim any
		set   bool
		want  bool
	}{
		{nil, false, true},
		{true, true, true},
		{false, true, false},
		{"true", true, true},
		{"false", true, false},
		{"", true, false},
		{nil, true, false},
		{float64(0), true, false},
		{float64(1), true, false},
	} {
		claims := map[string]any{"email": "ada@example.com"}
		if tc.set {
			claims["email_verified"] = tc.claim
		}
		if got := emailVerified(claims); got != tc.want {
			t.Errorf("email_verified %#v (present %v): verified %v, want %v", tc.claim, tc.set, got, tc.want)
		}
	}
}
