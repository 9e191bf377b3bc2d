package jwtauthority_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/internal/natstest"
)

func TestRenderServerConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		jwt, sys, url string
		want          string
	}{
		{
			name: "plain values",
			jwt:  "eyJhbGciOiJlZDI1NTE5In0.eyJqdGkiOiJYIn0.sig-_", sys: "ABCDEF", url: "http://127.0.0.1:8080/jwt/v1/accounts/",
			want: "operator: \"eyJhbGciOiJlZDI1NTE5In0.eyJqdGkiOiJYIn0.sig-_\"\n" +
				"system_account: \"ABCDEF\"\n" +
				"resolver: URL(\"http://127.0.0.1:8080/jwt/v1/accounts/\")\n",
		},
		{
			name: "line breaks and quotes cannot add settings",
			jwt:  "x\"\nresolver_preload: {}", sys: "A\nB", url: "http://h/\")\nlisten: 0.0.0.0:4222",
			want: "operator: \"x%22%0Aresolver_preload:%20{}\"\n" +
				"system_account: \"A%0AB\"\n" +
				"resolver: URL(\"http://h/%22%29%0Alisten:%200.0.0.0:4222\")\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(jwtauthority.RenderServerConfig(tc.jwt, tc.sys, tc.url))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("fragment mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateResolverURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080/jwt/v1/accounts/", true},
		{"https://provisioner.internal/jwt/v1/accounts/", true},
		{"http://127.0.0.1:8080/jwt/v1/accounts", false},
		{"ftp://h/jwt/", false},
		{"/jwt/v1/accounts/", false},
		{"http:///jwt/", false},
		{"http://h/jwt/?x=1", false},
		{"http://u:p@h/jwt/", false},
		{"http://h/a b/", false},
		{"http://member-nats/jwt/v1/accounts/", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			err := jwtauthority.ValidateResolverURL(tc.url)
			if tc.ok && err != nil {
				t.Fatalf("ValidateResolverURL: %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, jwtauthority.ErrInvalidResolverURL) {
				t.Fatalf("ValidateResolverURL error = %v, want %v", err, jwtauthority.ErrInvalidResolverURL)
			}
		})
	}
}

// resolver serves account JWTs the way the provisioner does: the base URL
// answers 200 (nats-server checks it at start), keys answer their JWT.
type resolver struct {
	mu      sync.Mutex
	jwts    map[string]string
	fetches map[string]int
}

func (r *resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	key := strings.TrimPrefix(req.URL.Path, "/jwt/v1/accounts/")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetches[key]++
	if key == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	tok, ok := r.jwts[key]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	fmt.Fprint(w, tok)
}

// The fragment is what init-operator writes; nats-server must accept it
// through include, with the operator JWT inline, and resolve accounts.
func TestServerAcceptsRenderedConfig(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	s := newSigner(t, k)
	res := &resolver{jwts: map[string]string{}, fetches: map[string]int{}}
	for _, spec := range []provisioning.AccountSpec{
		{PubKey: k.sysPub, Name: "SYS", Kind: provisioning.KindSystem},
		{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl},
	} {
		res.jwts[spec.PubKey] = signed(t, s, spec)
	}
	hs := httptest.NewServer(res)
	t.Cleanup(hs.Close)
	resolverURL := hs.URL + "/jwt/v1/accounts/"
	if err := jwtauthority.ValidateResolverURL(resolverURL); err != nil {
		t.Fatalf("ValidateResolverURL(%s): %v", resolverURL, err)
	}
	opJWT, err := jwtauthority.SignOperator(k.opSeed, "rxc-test", k.sysPub, "")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	frag := jwtauthority.RenderServerConfig(opJWT, k.sysPub, resolverURL)
	if err := os.WriteFile(filepath.Join(dir, "operator.conf"), frag, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.New(t, natstest.Options{Dir: dir, Config: "include \"operator.conf\"\n", ReadyTimeout: 10 * time.Second})
	if err := srv.TryStart(); err != nil {
		t.Fatalf("nats-server rejected the fragment: %v\n%s", err, frag)
	}
	opts, err := server.ProcessConfigFile(srv.ConfigPath())
	if err != nil {
		t.Fatalf("ProcessConfigFile rejected the fragment: %v\n%s", err, frag)
	}
	if len(opts.TrustedOperators) != 1 || opts.TrustedOperators[0].Subject != k.opPub {
		t.Fatalf("trusted operators = %v, want the inline operator %s", opts.TrustedOperators, k.opPub)
	}
	if opts.SystemAccount != k.sysPub {
		t.Errorf("system account = %s, want %s", opts.SystemAccount, k.sysPub)
	}
	if _, ok := opts.AccountResolver.(*server.URLAccResolver); !ok {
		t.Fatalf("resolver is %T, want *server.URLAccResolver", opts.AccountResolver)
	}

	m, err := s.MintUser(provisioning.UserSpec{AccountPubKey: k.ctlPub, AccountSeed: k.ctlSeed, Name: "backend", Permissions: topology.BackendPermissions()})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL(), nats.UserJWTAndSeed(m.JWT, string(m.Seed)), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("connect as a CONTROL user: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	res.mu.Lock()
	fetched := res.fetches[k.ctlPub]
	res.mu.Unlock()
	if fetched == 0 {
		t.Error("the server never fetched the CONTROL account from the resolver")
	}
}

// A user JWT signed again (a renewal) on a provisioner replica whose clock
// runs ahead of the replica revoking the key carries an issue time after
// the revocation time. nats-server refuses a JWT only when it was issued at
// or before the key's revocation, so without RevocationMargin such a JWT
// would outlive the revocation until it expires. Here the revoking clock is
// 30 s behind the signing one.
func TestRevocationCoversJWTsSignedByAFasterClock(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	s := newSigner(t, k)
	mint := func(name string) provisioning.MintedUser {
		m, err := s.MintUser(provisioning.UserSpec{AccountPubKey: k.ctlPub, AccountSeed: k.ctlSeed, Name: name, Permissions: topology.BackendPermissions()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	revoked, kept := mint("revoked"), mint("kept")
	revokedAt := time.Now().Add(-30 * time.Second).UTC().Truncate(time.Second)

	// The control: nats-server's rule (issued at or before the time) would
	// let this JWT through a revocation signed at the revoking clock's time.
	uc, err := jwt.DecodeUserClaims(revoked.JWT)
	if err != nil {
		t.Fatal(err)
	}
	raw := jwt.NewAccountClaims(k.ctlPub)
	raw.RevokeAt(revoked.PubKey, revokedAt)
	if raw.IsClaimRevoked(uc) {
		t.Fatal("control: a JWT issued after the revocation time counts as revoked without the margin; the test proves nothing")
	}

	res := &resolver{jwts: map[string]string{}, fetches: map[string]int{}}
	for _, spec := range []provisioning.AccountSpec{
		{PubKey: k.sysPub, Name: "SYS", Kind: provisioning.KindSystem},
		{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl,
			Revocations: []provisioning.Revocation{{AccountPubKey: k.ctlPub, UserPubKey: revoked.PubKey, RevokedAt: revokedAt}}},
	} {
		res.jwts[spec.PubKey] = signed(t, s, spec)
	}
	// What the store holds and what the JWT says stay one revocation.
	if revs, err := s.AccountRevocations(res.jwts[k.ctlPub]); err != nil || len(revs) != 1 || !revs[0].RevokedAt.Equal(revokedAt) {
		t.Fatalf("AccountRevocations = %v, %v; want the revocation at %s", revs, err, revokedAt)
	}
	hs := httptest.NewServer(res)
	t.Cleanup(hs.Close)
	opJWT, err := jwtauthority.SignOperator(k.opSeed, "rxc-test", k.sysPub, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "operator.conf"), jwtauthority.RenderServerConfig(opJWT, k.sysPub, hs.URL+"/jwt/v1/accounts/"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t, natstest.Options{Dir: dir, Config: "include \"operator.conf\"\n"})
	nc, err := nats.Connect(srv.URL(), nats.UserJWTAndSeed(kept.JWT, string(kept.Seed)), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("positive control: a user of the same account: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(srv.URL(), nats.UserJWTAndSeed(revoked.JWT, string(revoked.Seed)), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("nats-server accepted a revoked key's JWT signed 30 s after the revocation by a faster clock")
	}
}
