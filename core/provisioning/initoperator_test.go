package provisioning_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
)

// initFixture runs init-operator on the in-memory store and the fakes of
// the operator authority and the seed files.
type initFixture struct {
	store *provisionmem.Store
	auth  *provisioningtest.Authority
	files *provisioningtest.Files
	init  *provisioning.Initializer
	now   time.Time
}

func newInitFixture(t *testing.T) *initFixture {
	t.Helper()
	store := memtest.Store(t, provisionmem.New, provisionmem.Config{})
	f := &initFixture{store: store, auth: &provisioningtest.Authority{}, files: &provisioningtest.Files{},
		now: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)}
	var err error
	f.init, err = provisioning.NewInitializer(provisioning.InitConfig{
		Store: store, Authority: f.auth, Files: f.files, Clock: func() time.Time { return f.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func initRequest() provisioning.InitRequest {
	return provisioning.InitRequest{
		Name: "RXC", ResolverURL: "http://resolver:8080/jwt/v1/accounts/", SeedPath: "/keys/operator.nk",
		NATSConfigPath: "/nats/operator.conf", ControlAccountName: "CONTROL",
	}
}

func (f *initFixture) run(t *testing.T, req provisioning.InitRequest) (provisioning.InitResult, error) {
	t.Helper()
	return f.init.InitOperator(context.Background(), req)
}

// mustRun is a run that has to succeed.
func (f *initFixture) mustRun(t *testing.T, req provisioning.InitRequest) provisioning.InitResult {
	t.Helper()
	res, err := f.run(t, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A first run creates the operator and its SYS and CONTROL accounts, puts
// the identity seed where serve reads it, and writes the fragment.
func TestInitOperatorCreates(t *testing.T) {
	f := newInitFixture(t)
	req := initRequest()
	res := f.mustRun(t, req)
	if !res.Created {
		t.Error("Created = false on a first run")
	}
	stored, err := f.store.Operator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Operator, stored); diff != "" {
		t.Errorf("stored operator differs from the result (-result +stored):\n%s", diff)
	}
	if res.Operator.Name != "RXC" || !res.Operator.CreatedAt.Equal(f.now) {
		t.Errorf("operator = %+v, want name RXC created at %s", res.Operator, f.now)
	}
	spec, err := provisioningtest.ParseOperatorJWT(res.Operator.JWT)
	if err != nil {
		t.Fatal(err)
	}
	want := provisioning.OperatorJWT{Name: "RXC", SystemAccount: res.Operator.SystemAccount, ResolverURL: req.ResolverURL}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("operator JWT (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		pub  string
		kind provisioning.AccountKind
		name string
	}{{res.Operator.SystemAccount, provisioning.KindSystem, "SYS"}, {res.Operator.ControlAccount, provisioning.KindControl, "CONTROL"}} {
		a, err := f.store.Account(context.Background(), c.pub)
		if err != nil {
			t.Fatalf("account %s: %v", c.name, err)
		}
		claims, err := provisioningtest.AccountClaims(a.JWT)
		if err != nil {
			t.Fatal(err)
		}
		if a.Kind != c.kind || a.Name != c.name || claims.PubKey != c.pub || claims.Kind != c.kind || len(a.Seed) == 0 {
			t.Errorf("account %s = %+v with claims %+v", c.name, a, claims)
		}
	}
	// The accounts' keys come before the CONTROL account exists; they are
	// signed by a signer that knows it, both with the operator's seed.
	seed := "seed:" + res.Operator.PubKey
	if diff := cmp.Diff([][2]string{{seed, ""}, {seed, res.Operator.ControlAccount}}, f.auth.Signers); diff != "" {
		t.Errorf("account signers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{req.SeedPath, req.NATSConfigPath}, f.files.Names()); diff != "" {
		t.Errorf("files left (no staged file remains) (-want +got):\n%s", diff)
	}
	if got, _ := f.files.Get(req.SeedPath); string(got) != seed {
		t.Errorf("seed file holds %q, want the identity seed %q", got, seed)
	}
	frag, _ := f.files.Get(req.NATSConfigPath)
	if want := string(f.auth.ServerConfig(res.Operator, req.ResolverURL)); string(frag) != want {
		t.Errorf("fragment = %q, want %q", frag, want)
	}
}

// With an identity seed path the identity seed goes there and a signing
// key, which the operator JWT lists, signs the accounts and goes where
// serve reads; a second run with that signing seed is accepted.
func TestInitOperatorWithSigningKey(t *testing.T) {
	f := newInitFixture(t)
	req := initRequest()
	req.IdentitySeedPath = "/offline/identity.nk"
	res := f.mustRun(t, req)
	identity, _ := f.files.Get(req.IdentitySeedPath)
	signing, _ := f.files.Get(req.SeedPath)
	if string(identity) != "seed:"+res.Operator.PubKey {
		t.Errorf("identity seed file holds %q, want the operator's identity seed", identity)
	}
	signingPub, err := f.auth.PublicKeyFromSeed(signing)
	if err != nil || signingPub == res.Operator.PubKey {
		t.Fatalf("seed file holds %q (%v), want a signing key's seed", signing, err)
	}
	spec, err := provisioningtest.ParseOperatorJWT(res.Operator.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{signingPub}, spec.SigningKeys); diff != "" {
		t.Errorf("signing keys in the operator JWT (-want +got):\n%s", diff)
	}
	if got := f.auth.Signers[1][0]; got != string(signing) {
		t.Errorf("accounts signed with %q, want the signing seed", got)
	}
	again, err := f.run(t, req)
	if err != nil || again.Created || again.Operator.PubKey != res.Operator.PubKey {
		t.Errorf("second run = %+v, %v; want the same operator, not created", again, err)
	}
}

// A second run changes nothing but the fragment.
func TestInitOperatorRerunKeepsOperator(t *testing.T) {
	f := newInitFixture(t)
	req := initRequest()
	first := f.mustRun(t, req)
	seed, _ := f.files.Get(req.SeedPath)
	req.ResolverURL = "http://elsewhere:8080/jwt/v1/accounts/"
	second := f.mustRun(t, req)
	if second.Created {
		t.Error("Created = true on a second run")
	}
	if diff := cmp.Diff(first.Operator, second.Operator); diff != "" {
		t.Errorf("operator changed (-first +second):\n%s", diff)
	}
	if got, _ := f.files.Get(req.SeedPath); string(got) != string(seed) {
		t.Error("the seed file changed")
	}
	if frag, _ := f.files.Get(req.NATSConfigPath); !strings.Contains(string(frag), "elsewhere") {
		t.Errorf("fragment not rewritten: %q", frag)
	}
}

// Every state but "neither" and "both agree" stops init-operator before it
// changes anything.
func TestInitOperatorRefuses(t *testing.T) {
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, f *initFixture, req provisioning.InitRequest)
		want    string
	}{
		{"seed file without an operator", func(t *testing.T, f *initFixture, req provisioning.InitRequest) {
			f.files.Put(req.SeedPath, []byte("seed:O1"))
		}, "exists but the store has no operator"},
		{"operator without its seed file", func(t *testing.T, f *initFixture, req provisioning.InitRequest) {
			f.mustRun(t, req)
			f.files.Discard(req.SeedPath)
		}, "the seed file /keys/operator.nk is missing"},
		{"seed file of another operator", func(t *testing.T, f *initFixture, req provisioning.InitRequest) {
			f.mustRun(t, req)
			f.files.Put(req.SeedPath, []byte("seed:O-another"))
		}, "refusing to continue"},
		{"seed file that does not decode", func(t *testing.T, f *initFixture, req provisioning.InitRequest) {
			f.mustRun(t, req)
			f.files.Put(req.SeedPath, []byte("garbage"))
		}, "operator seed file /keys/operator.nk: not a seed"},
		{"seed file unreadable", func(t *testing.T, f *initFixture, req provisioning.InitRequest) {
			f.files.ExistsErr = errors.New("permission denied")
		}, "operator seed file: permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newInitFixture(t)
			req := initRequest()
			c.prepare(t, f, req)
			before, _ := f.store.Operator(context.Background())
			seedBefore, _ := f.files.Get(req.SeedPath)
			_, err := f.run(t, req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			after, _ := f.store.Operator(context.Background())
			seedAfter, _ := f.files.Get(req.SeedPath)
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("stored operator changed (-before +after):\n%s", diff)
			}
			if string(seedBefore) != string(seedAfter) {
				t.Errorf("seed file changed from %q to %q", seedBefore, seedAfter)
			}
		})
	}
}

// A failure before the store commits leaves nothing a re-run would refuse:
// no operator and no seed file, staged or placed.
func TestInitOperatorFailureLeavesNothing(t *testing.T) {
	f := newInitFixture(t)
	f.auth.SignErr = errors.New("signing broke")
	req := initRequest()
	if _, err := f.run(t, req); err == nil || !strings.Contains(err.Error(), "signing broke") {
		t.Fatalf("err = %v, want the signing failure", err)
	}
	if _, err := f.store.Operator(context.Background()); !errors.Is(err, provisioning.ErrNoOperator) {
		t.Errorf("store after the failure: %v, want ErrNoOperator", err)
	}
	if names := f.files.Names(); len(names) != 0 {
		t.Errorf("files left: %v", names)
	}
	f.auth.SignErr = nil
	if res, err := f.run(t, req); err != nil || !res.Created {
		t.Errorf("re-run after the failure = %+v, %v; want the operator created", res, err)
	}
}

// A seed file that cannot be placed after the store committed is reported
// with where it is; the operator is stored.
func TestInitOperatorPlaceFails(t *testing.T) {
	f := newInitFixture(t)
	f.files.PlaceErr = errors.New("cross-device link")
	_, err := f.run(t, initRequest())
	if err == nil || !strings.Contains(err.Error(), "operator stored but a seed file could not be placed at /keys/operator.nk") ||
		!strings.Contains(err.Error(), "cross-device link") {
		t.Fatalf("err = %v", err)
	}
	if _, err := f.store.Operator(context.Background()); err != nil {
		t.Errorf("operator not stored: %v", err)
	}
	// The stored operator's key exists only in the staged file: it stays
	// where the error says it is.
	for _, name := range []string{"/keys/operator.nk.staged-1"} {
		if !strings.Contains(err.Error(), "it is at "+name) {
			t.Errorf("error %q does not name %s", err, name)
		}
		if seed, ok := f.files.Get(name); !ok || len(seed) == 0 {
			t.Errorf("staged seed %s removed although its key is stored", name)
		}
	}
}

// When only the fragment fails, the result names the operator, which
// exists, and the error names the flag.
func TestInitOperatorFragmentFails(t *testing.T) {
	f := newInitFixture(t)
	f.files.ConfigErr = errors.New("read-only file system")
	res, err := f.run(t, initRequest())
	if err == nil || !strings.HasPrefix(err.Error(), "--nats-config: ") {
		t.Fatalf("err = %v, want a --nats-config error", err)
	}
	stored, serr := f.store.Operator(context.Background())
	if serr != nil || !res.Created || res.Operator.PubKey != stored.PubKey {
		t.Errorf("result %+v, stored %+v (%v); want the stored operator, created", res, stored, serr)
	}
}

func TestNewInitializerNeedsPorts(t *testing.T) {
	if _, err := provisioning.NewInitializer(provisioning.InitConfig{}); err == nil {
		t.Error("NewInitializer without ports: no error")
	}
}
