package app

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := trustedProxies([]string{"10.0.0.0/8", " 192.0.2.7 ", "", "fd00::/8", "::ffff:198.51.100.1", "10.1.2.3/8"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("198.51.100.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("trustedProxies (-want +got):\n%s", d)
	}
	for _, bad := range []string{"proxy.example", "10.0.0.0/33", "10.0.0.0/8/1"} {
		if _, err := trustedProxies([]string{bad}); err == nil {
			t.Errorf("trustedProxies(%q) accepted", bad)
		}
	}
}

func TestOperatorSealer(t *testing.T) {
	t.Parallel()
	if s, err := operatorSealer(""); err != nil || s != nil {
		t.Errorf("no key: %v, %v; want second factors off", s, err)
	}
	s, err := operatorSealer("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	if err != nil || s == nil {
		t.Fatalf("hex key: %v", err)
	}
	sealed, err := s.Seal([]byte("secret"), []byte("op-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(sealed, []byte("op-2")); err == nil {
		t.Error("a value sealed for op-1 opened for op-2")
	}
	if _, err := operatorSealer("too short"); err == nil {
		t.Error("a short key accepted")
	}
}

func TestOIDCProviderConfig(t *testing.T) {
	t.Parallel()
	if p, _, err := oidcProvider(OIDCConfig{}); p != nil || err != nil {
		t.Errorf("no issuer: %v, %v; want single sign-on off", p, err)
	}
	ok := OIDCConfig{IssuerURL: "https://idp.example", ClientID: "rxc", RedirectURL: "https://rxc.example/api/auth/oidc/callback", Scopes: "openid email profile", GroupMap: "ops=admin"}
	if p, g, err := oidcProvider(ok); err != nil || p == nil || len(g) != 1 {
		t.Errorf("complete configuration: %v, %v, %v", p, g, err)
	}
	for name, change := range map[string]func(*OIDCConfig){
		"no client id":          func(c *OIDCConfig) { c.ClientID = "" },
		"no redirect URL":       func(c *OIDCConfig) { c.RedirectURL = "" },
		"no group map":          func(c *OIDCConfig) { c.GroupMap = "" },
		"bad group map":         func(c *OIDCConfig) { c.GroupMap = "ops=root" },
		"scopes without openid": func(c *OIDCConfig) { c.Scopes = "email profile" },
	} {
		c := ok
		change(&c)
		if _, _, err := oidcProvider(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
