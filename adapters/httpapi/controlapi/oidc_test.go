package controlapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/oidcsignin"
	"github.com/rxc-project/rxc/core/operators"
)

const consoleURL = "https://console.example/"

// idp is a real OpenID provider (oauth2-proxy's mockoidc: discovery, JWKS,
// authorization and token endpoints with PKCE) started by the test, with a
// hook that can change the claims of the ID tokens it issues (re-signed
// with its own key: what a provider issues for another client, or with
// another nonce).
type idp struct {
	*mockoidc.MockOIDC
	mu     sync.Mutex
	tamper func(jwt.MapClaims)
	// forger, when set, signs the (tampered) ID token instead of the
	// provider's key: a token the provider never issued.
	forger *mockoidc.Keypair
}

func startIDP(t *testing.T) *idp {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{MockOIDC: m}
	if err := m.AddMiddleware(p.rewriteIDToken); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return p
}

func (p *idp) setTamper(f func(jwt.MapClaims)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper, p.forger = f, nil
}

func (p *idp) setForger(k *mockoidc.Keypair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper, p.forger = func(jwt.MapClaims) {}, k
}

func (p *idp) rewriteIDToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		tamper, signer := p.tamper, p.forger
		p.mu.Unlock()
		if signer == nil {
			signer = p.Keypair
		}
		if tamper == nil || r.URL.Path != mockoidc.TokenEndpoint {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			if raw, ok := body["id_token"].(string); ok {
				claims := jwt.MapClaims{}
				if _, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return p.Keypair.PublicKey, nil }, jwt.WithoutClaimsValidation()); err == nil {
					tamper(claims)
					if signed, err := signer.SignJWT(claims); err == nil {
						body["id_token"] = signed
					}
				}
			}
			out, _ := json.Marshal(body)
			rec.Body = bytes.NewBuffer(out)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// ssoEnv serves the API with single sign-on against p.
func ssoEnv(t *testing.T, p *idp) *env {
	t.Helper()
	prov, err := oidcsignin.New(oidcsignin.Config{
		IssuerURL: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		RedirectURL: "https://rxc.example/api/auth/oidc/callback",
		// mockoidc, like Okta, puts groups in the token for this scope only.
		Scopes: []string{"openid", "email", "profile", "groups"},
	})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := operators.ParseGroupMap("rxc-admins=admin,noc=operator:acme|globex")
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, options{api: func(c *controlapi.Config) {
		c.OIDC, c.OIDCDisplayName, c.OIDCGroups, c.ConsoleURL = prov, "Acme SSO", groups, consoleURL
	}})
}

// browser follows no redirects on its own and keeps cookies.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, client: &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(u string) *http.Response {
	b.t.Helper()
	res, err := b.client.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { res.Body.Close() })
	return res
}

// signIn runs the flow up to the provider's redirect back and returns the
// callback URL on the API (with code and state) for user.
func (b *browser) toProvider(e *env, p *idp, user mockoidc.User) string {
	b.t.Helper()
	res := b.get(e.srv.URL + "/api/auth/oidc/login")
	if res.StatusCode != http.StatusFound {
		b.t.Fatalf("GET /api/auth/oidc/login: %d", res.StatusCode)
	}
	auth, err := url.Parse(res.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(auth.String(), p.AuthorizationEndpoint()) {
		b.t.Fatalf("login redirects to %q, want the provider's authorization endpoint", res.Header.Get("Location"))
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" || q.Get("client_id") != p.ClientID {
		b.t.Fatalf("authorization request lacks PKCE S256, state or nonce: %v", q)
	}
	p.QueueUser(user)
	res = b.get(auth.String())
	if res.StatusCode != http.StatusFound {
		b.t.Fatalf("provider's authorize: %d", res.StatusCode)
	}
	back, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return e.srv.URL + "/api/auth/oidc/callback?" + back.RawQuery
}

func problemOf(t *testing.T, res *http.Response) (int, string) {
	t.Helper()
	var body struct{ Code, Detail string }
	_ = json.NewDecoder(res.Body).Decode(&body)
	t.Logf("%d %s: %s", res.StatusCode, body.Code, body.Detail)
	return res.StatusCode, body.Code
}

func sessionOf(res *http.Response) string {
	for _, c := range res.Cookies() {
		if c.Name == controlapi.SessionCookie && c.MaxAge > 0 {
			return c.Value
		}
	}
	return ""
}

func user(email string, groups ...string) *mockoidc.MockUser {
	return &mockoidc.MockUser{Subject: "sub-" + email, Email: email, EmailVerified: true, Groups: groups}
}

// TestOIDCSignIn runs the whole authorization code flow against a real
// OpenID provider: a mapped group signs in (operator created, then updated
// from the claims, session cookie as a password login, redirect to the
// console); no mapped group, tampered state, a replayed code, a token for
// another audience, an expired token and a wrong nonce are refused,
// audited, and create nothing; a rotated signing key is picked up from the
// JWKS without a restart.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	e := ssoEnv(t, p)
	ctx := context.Background()
	created := func(email string) bool {
		_, _, err := e.store.OperatorByEmail(ctx, email)
		return !errors.Is(err, operators.ErrNotFound)
	}

	// The console learns the button's label.
	res := e.do(request{method: "GET", path: "/api/auth/providers"})
	if got := res.object(t)["oidc"]; got == nil || got.(map[string]any)["displayName"] != "Acme SSO" {
		t.Errorf("providers: %s", res.body)
	}

	// A mapped group signs in.
	b := newBrowser(t)
	cb := b.toProvider(e, p, user("ada@example.com", "engineering", "noc"))
	res2 := b.get(cb)
	if res2.StatusCode != http.StatusFound || res2.Header.Get("Location") != consoleURL {
		t.Fatalf("callback: %d to %q, want 302 to the console", res2.StatusCode, res2.Header.Get("Location"))
	}
	session := sessionOf(res2)
	if session == "" {
		t.Fatal("no session cookie after single sign-on")
	}
	me := e.do(request{method: "GET", path: "/api/auth/me", session: session}).object(t)
	if me["email"] != "ada@example.com" || me["role"] != "operator" || len(me["tenants"].([]any)) != 2 {
		t.Errorf("me after SSO: %v", me)
	}
	// Replayed code: the same callback again, even with the attempt's
	// cookie put back, is refused (the provider spent the code).
	attempt := ""
	for _, c := range b.client.Jar.Cookies(mustURL(t, e.srv.URL+"/api/auth/oidc/callback")) {
		if c.Name == "rxc_oidc" {
			attempt = c.Value
		}
	}
	if attempt != "" {
		t.Error("the attempt's cookie outlived the callback")
	}
	if code, c := problemOf(t, b.get(cb)); code != http.StatusUnauthorized || c != "sso_refused" {
		t.Errorf("replayed callback without the attempt: %d %s", code, c)
	}

	// Groups change at the provider: the next sign-in updates the operator.
	b = newBrowser(t)
	if res := b.get(b.toProvider(e, p, user("ada@example.com", "rxc-admins"))); res.StatusCode != http.StatusFound {
		t.Fatalf("second sign-in: %d", res.StatusCode)
	}
	if o, _, _ := e.store.OperatorByEmail(ctx, "ada@example.com"); o.Role != operators.RoleAdmin {
		t.Errorf("role after the groups changed: %s, want admin", o.Role)
	}

	refusals := []struct {
		name     string
		email    string
		groups   []string
		prepare  func()
		callback func(b *browser, cb string) *http.Response
		status   int
		code     string
	}{
		{name: "no mapped group", email: "nobody@example.com", groups: []string{"engineering"}, status: http.StatusForbidden, code: "no_role"},
		{name: "tampered state", email: "eve1@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			callback: func(b *browser, cb string) *http.Response {
				u := mustURL(t, cb)
				q := u.Query()
				q.Set("state", q.Get("state")+"x")
				u.RawQuery = q.Encode()
				return b.get(u.String())
			}},
		{name: "replayed code with the attempt's cookie", email: "eve2@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			callback: func(b *browser, cb string) *http.Response {
				jar := b.client.Jar
				saved := jar.Cookies(mustURL(t, e.srv.URL+"/api/auth/oidc/callback"))
				// The code is used once by someone else (the legitimate
				// callback), then replayed with the attempt.
				other := &browser{t: t, client: &http.Client{Jar: jar, CheckRedirect: b.client.CheckRedirect}}
				if res := other.get(cb); res.StatusCode != http.StatusFound {
					t.Fatalf("first use of the code: %d", res.StatusCode)
				}
				jar.SetCookies(mustURL(t, e.srv.URL+"/api/auth/oidc/callback"), saved)
				return b.get(cb)
			}},
		{name: "ID token for another client", email: "eve3@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			prepare: func() { p.setTamper(func(c jwt.MapClaims) { c["aud"] = []string{"another-client"} }) }},
		{name: "wrong nonce", email: "eve4@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			prepare: func() { p.setTamper(func(c jwt.MapClaims) { c["nonce"] = "not-the-nonce" }) }},
		{name: "expired ID token", email: "eve5@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			prepare: func() {
				p.setTamper(func(c jwt.MapClaims) {
					c["exp"] = time.Now().Add(-time.Minute).Unix()
					c["iat"] = time.Now().Add(-time.Hour).Unix()
				})
			}},
		{name: "signed by a key the provider does not publish", email: "eve7@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			prepare: func() {
				forged, err := mockoidc.RandomKeypair(2048)
				if err != nil {
					t.Fatal(err)
				}
				p.setForger(forged)
			}},
		{name: "another issuer", email: "eve6@example.com", groups: []string{"noc"}, status: http.StatusUnauthorized, code: "sso_refused",
			prepare: func() { p.setTamper(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }) }},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			p.setTamper(nil)
			if tc.prepare != nil {
				tc.prepare()
			}
			defer p.setTamper(nil)
			b := newBrowser(t)
			cb := b.toProvider(e, p, user(tc.email, tc.groups...))
			var res *http.Response
			if tc.callback != nil {
				res = tc.callback(b, cb)
			} else {
				res = b.get(cb)
			}
			if sessionOf(res) != "" {
				t.Error("BROKEN: a refused sign-in set a session cookie")
			}
			if code, c := problemOf(t, res); code != tc.status || c != tc.code {
				t.Errorf("%d %s, want %d %s", code, c, tc.status, tc.code)
			}
			if tc.callback == nil && created(tc.email) {
				t.Errorf("BROKEN: %s was created", tc.email)
			}
		})
	}

	// Key rotation: the provider signs with a new key; the next sign-in
	// works, the new key fetched from the JWKS.
	oldKid, _ := p.Keypair.KeyID()
	kp, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	p.Keypair = kp
	if newKid, _ := kp.KeyID(); newKid == oldKid {
		t.Fatal("the rotated key has the old key id")
	}
	b = newBrowser(t)
	if res := b.get(b.toProvider(e, p, user("bob@example.com", "noc"))); res.StatusCode != http.StatusFound || sessionOf(res) == "" {
		t.Errorf("sign-in after the key rotation: %d", res.StatusCode)
	}

	// The audit trail has the sign-ins and the refusals.
	res = e.do(request{method: "GET", path: "/api/audit?limit=200", operator: true})
	var page struct {
		Items []struct {
			Action, Actor, Outcome, Detail string
		}
	}
	if err := json.Unmarshal(res.body, &page); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, it := range page.Items {
		if it.Action == "auth.oidc" {
			counts[it.Outcome+" "+it.Detail]++
		}
	}
	if counts["success "] < 3 || counts["denied no_role"] < 1 || counts["denied sso_refused"] < 7 {
		t.Errorf("audit of auth.oidc: %v; want the sign-ins and every refusal", counts)
	}
}

// TestOIDCNotConfigured: without OIDC_ISSUER_URL the routes answer 404 and
// the console is told there is no single sign-on.
func TestOIDCNotConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.do(request{method: "GET", path: "/api/auth/oidc/login"}).expect(t, "login", http.StatusNotFound, "route_not_found")
	e.do(request{method: "GET", path: "/api/auth/oidc/callback?state=x&code=y"}).expect(t, "callback", http.StatusNotFound, "route_not_found")
	if got := e.do(request{method: "GET", path: "/api/auth/providers"}).object(t); got["oidc"] != nil {
		t.Errorf("providers without OIDC: %v", got)
	}
}

// TestSSOOnlyOverHTTP: with SSO-only on, password sign-in answers 403
// password_login_disabled except for the break-glass admin with its right
// password.
func TestSSOOnlyOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.do(request{method: "POST", path: "/api/operators", operator: true,
		body: `{"email":"ops2@example.com","password":"operator passphrase","role":"operator","tenants":[]}`}).expect(t, "create", http.StatusCreated, "")
	e.do(request{method: "PATCH", path: "/api/auth/settings", operator: true, body: `{"ssoOnly":true}`}).
		expect(t, "SSO-only without a break-glass account", http.StatusBadRequest, "invalid_input")
	e.do(request{method: "PATCH", path: "/api/auth/settings", operator: true, body: `{"ssoOnly":true,"breakGlassEmail":"` + operatorEmail + `"}`}).
		expect(t, "SSO-only", http.StatusOK, "")
	e.do(request{method: "POST", path: "/api/auth/login", body: loginBody("ops2@example.com", "operator passphrase")}).
		expect(t, "a password login in SSO-only mode", http.StatusForbidden, "password_login_disabled")
	// The break-glass account's wrong password answers the same, or probing
	// would name it.
	e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(operatorEmail, "not the passphrase")}).
		expect(t, "the break-glass account's wrong password in SSO-only mode", http.StatusForbidden, "password_login_disabled")
	e.loginAs(operatorEmail, operatorPassword)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
