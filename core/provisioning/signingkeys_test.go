package provisioning_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
)

// rotationFixture is an operator made by init-operator with an offline
// identity seed, on the in-memory store and the fakes, and a KeyRotator on
// the same ports.
type rotationFixture struct {
	*initFixture
	op       provisioning.Operator
	firstKey string // the signing key init-operator made
	rot      *provisioning.KeyRotator
	store    rotationStore
}

// rotationStore is the in-memory store, which a test can make change the
// operator JWT between the rotator's read and its replace.
type rotationStore struct {
	*provisionmem.Store
	before func()
}

func (s rotationStore) ReplaceOperatorJWT(ctx context.Context, pubKey, oldJWT, newJWT string) error {
	if s.before != nil {
		s.before()
	}
	return s.Store.ReplaceOperatorJWT(ctx, pubKey, oldJWT, newJWT)
}

const (
	identityPath = "/offline/identity.nk"
	newSeedPath  = "/keys/signing-2.nk"
)

func newRotationFixture(t *testing.T) *rotationFixture {
	t.Helper()
	f := &rotationFixture{initFixture: newInitFixture(t)}
	req := initRequest()
	req.IdentitySeedPath = identityPath
	res, err := f.run(t, req)
	if err != nil {
		t.Fatal(err)
	}
	f.op = res.Operator
	signing, _ := f.files.Get(req.SeedPath)
	if f.firstKey, err = f.auth.PublicKeyFromSeed(signing); err != nil {
		t.Fatal(err)
	}
	f.store = rotationStore{Store: f.initFixture.store}
	f.rot, err = provisioning.NewKeyRotator(provisioning.KeyRotationConfig{Store: &f.store, Authority: f.auth, Files: f.files})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// operator returns the stored operator and the signing keys its JWT lists.
func (f *rotationFixture) operator(t *testing.T) (provisioning.Operator, []string) {
	t.Helper()
	op, err := f.store.Operator(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	identity, spec, err := f.auth.ReadOperator(op.JWT)
	if err != nil || identity != op.PubKey {
		t.Fatalf("stored operator JWT reads as %s (%v), want %s's", identity, err, op.PubKey)
	}
	return op, spec.SigningKeys
}

// resignAll re-signs every account with seed, as a provisioner serving
// with that signing key does at its start.
func (f *rotationFixture) resignAll(t *testing.T, seed []byte) {
	t.Helper()
	ctx := context.Background()
	signer, err := f.auth.AccountSigner(seed, f.op.ControlAccount)
	if err != nil {
		t.Fatal(err)
	}
	accts, err := f.store.ListAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accts {
		_, _, err := f.store.Resign(ctx, a.PubKey, func(a provisioning.Account, _ []provisioning.Revocation) (string, error) {
			return signer.SignAccount(provisioning.AccountSpec{PubKey: a.PubKey, Name: a.Name, Kind: a.Kind})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The whole rotation: a second key is added (its seed placed, the fragment
// rewritten), the old one is refused while accounts are signed by it, and
// removed once they are re-signed with the new one.
func TestSigningKeyRotation(t *testing.T) {
	f := newRotationFixture(t)
	ctx := context.Background()
	added, err := f.rot.AddSigningKey(ctx, provisioning.SigningKeyRequest{
		IdentitySeedPath: identityPath, OutPath: newSeedPath, NATSConfigPath: "/nats/operator.conf",
	})
	if err != nil {
		t.Fatal(err)
	}
	op, keys := f.operator(t)
	if diff := cmp.Diff([]string{f.firstKey, added.Key}, keys); diff != "" {
		t.Errorf("signing keys after add (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(keys, added.Keys); diff != "" {
		t.Errorf("result's keys differ from the stored JWT's (-stored +result):\n%s", diff)
	}
	if op.PubKey != f.op.PubKey || op.SystemAccount != f.op.SystemAccount {
		t.Errorf("operator after add = %s/%s, want the same identity and system account", op.PubKey, op.SystemAccount)
	}
	seed, ok := f.files.Get(newSeedPath)
	if pub, err := f.auth.PublicKeyFromSeed(seed); !ok || err != nil || pub != added.Key {
		t.Errorf("--out holds %q (%v), want the seed of %s", seed, err, added.Key)
	}
	frag, _ := f.files.Get("/nats/operator.conf")
	if want := f.auth.ServerConfig(op, "http://resolver:8080/jwt/v1/accounts/"); string(frag) != string(want) {
		t.Errorf("fragment = %q, want %q (the new JWT, the JWT's resolver URL)", frag, want)
	}
	for _, n := range f.files.Names() {
		if strings.Contains(n, ".staged-") {
			t.Errorf("staged file %s left behind", n)
		}
	}

	remove := provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, Key: f.firstKey}
	_, err = f.rot.RemoveSigningKey(ctx, remove)
	if err == nil || !strings.Contains(err.Error(), "2 account JWTs are still signed by "+f.firstKey) {
		t.Fatalf("remove while SYS and CONTROL are signed by the key: %v, want a refusal naming 2 accounts", err)
	}
	if after, _ := f.operator(t); after.JWT != op.JWT {
		t.Error("a refused removal changed the operator JWT")
	}

	f.resignAll(t, seed)
	removed, err := f.rot.RemoveSigningKey(ctx, remove)
	if err != nil {
		t.Fatal(err)
	}
	if _, keys := f.operator(t); !cmp.Equal(keys, []string{added.Key}) || removed.Key != f.firstKey {
		t.Errorf("after removal the signing keys are %v (removed %s), want only %s", keys, removed.Key, added.Key)
	}
}

// What the rotator refuses, and that a refusal changes nothing: no JWT,
// no seed file, no fragment.
func TestSigningKeyRefusals(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(f *rotationFixture)
		remove  bool
		req     provisioning.SigningKeyRequest
		want    string
	}{
		{name: "existing --out", prepare: func(f *rotationFixture) { f.files.Put(newSeedPath, []byte("keep me")) },
			req: provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: newSeedPath}, want: "exists: refusing to replace a seed file"},
		{name: "a signing key as the identity seed",
			req:  provisioning.SigningKeyRequest{IdentitySeedPath: "/keys/operator.nk", OutPath: newSeedPath},
			want: "not the identity key of the store's operator"},
		{name: "missing identity seed",
			req:  provisioning.SigningKeyRequest{IdentitySeedPath: "/nowhere.nk", OutPath: newSeedPath},
			want: "--identity-seed"},
		{name: "a resolver URL nats-server cannot use",
			req:  provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: newSeedPath, NATSConfigPath: "/nats/new.conf", ResolverURL: "ftp://x/"},
			want: "--resolver-url"},
		{name: "removing a key the operator does not list", remove: true,
			req:  provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, Key: "O" + strings.Repeat("9", 55)},
			want: "is not a signing key of operator"},
		{name: "removing with a signing key's seed", remove: true,
			req:  provisioning.SigningKeyRequest{IdentitySeedPath: "/keys/operator.nk", Key: "O" + strings.Repeat("9", 55)},
			want: "a signing key cannot change the signing keys"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newRotationFixture(t)
			if tc.prepare != nil {
				tc.prepare(f)
			}
			filesBefore := f.files.Names()
			call := f.rot.AddSigningKey
			if tc.remove {
				call = f.rot.RemoveSigningKey
			}
			_, err := call(context.Background(), tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
			if op, _ := f.operator(t); op.JWT != f.op.JWT {
				t.Error("a refused request changed the operator JWT")
			}
			if diff := cmp.Diff(filesBefore, f.files.Names()); diff != "" {
				t.Errorf("a refused request changed the files (-before +after):\n%s", diff)
			}
			if got, _ := f.files.Get(newSeedPath); tc.prepare != nil && string(got) != "keep me" {
				t.Errorf("existing --out now holds %q", got)
			}
		})
	}
}

// Another rotation replacing the operator JWT between this one's read and
// its replace is reported, not overwritten; the new seed is not placed.
func TestSigningKeyConcurrentChange(t *testing.T) {
	f := newRotationFixture(t)
	ctx := context.Background()
	f.store.before = func() {
		f.store.before = nil
		if _, err := f.rot.AddSigningKey(ctx, provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: "/keys/other.nk"}); err != nil {
			t.Errorf("the concurrent add: %v", err)
		}
	}
	_, err := f.rot.AddSigningKey(ctx, provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: newSeedPath})
	if !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Fatalf("add racing another: %v, want ErrOperatorChanged", err)
	}
	if _, ok := f.files.Get(newSeedPath); ok {
		t.Error("the losing add placed its seed")
	}
	if _, keys := f.operator(t); len(keys) != 2 {
		t.Errorf("signing keys = %v, want the first and the concurrent one's", keys)
	}

	f.store.before = func() {
		f.store.before = nil
		if _, err := f.rot.AddSigningKey(ctx, provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: "/keys/third.nk"}); err != nil {
			t.Errorf("the concurrent add: %v", err)
		}
	}
	_, keys := f.operator(t)
	seed, _ := f.files.Get("/keys/other.nk")
	f.resignAll(t, seed)
	_, err = f.rot.RemoveSigningKey(ctx, provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, Key: keys[0]})
	if !errors.Is(err, provisioning.ErrOperatorChanged) || !strings.Contains(err.Error(), "run it again") {
		t.Errorf("remove racing an add: %v, want ErrOperatorChanged and to run it again", err)
	}
}

// A seed that cannot be placed after the store took the new JWT is kept
// where it was staged, and the error says where: the operator lists its key.
func TestSigningKeyPlaceFails(t *testing.T) {
	f := newRotationFixture(t)
	f.files.PlaceErr = errors.New("disk full")
	_, err := f.rot.AddSigningKey(context.Background(), provisioning.SigningKeyRequest{IdentitySeedPath: identityPath, OutPath: newSeedPath})
	if err == nil || !strings.Contains(err.Error(), "could not be placed") {
		t.Fatalf("error = %v, want the seed not placed", err)
	}
	_, keys := f.operator(t)
	var staged string
	for _, n := range f.files.Names() {
		if strings.HasPrefix(n, newSeedPath+".staged-") {
			staged = n
		}
	}
	if staged == "" || !strings.Contains(err.Error(), staged) {
		t.Fatalf("staged seed %q kept and named in %v? want both", staged, err)
	}
	seed, _ := f.files.Get(staged)
	if pub, _ := f.auth.PublicKeyFromSeed(seed); len(keys) != 2 || pub != keys[1] {
		t.Errorf("staged seed is of %s, signing keys %v: want the added key's seed", pub, keys)
	}
}

func TestNewKeyRotatorNeedsPorts(t *testing.T) {
	if _, err := provisioning.NewKeyRotator(provisioning.KeyRotationConfig{Authority: &provisioningtest.Authority{}, Files: &provisioningtest.Files{}}); err == nil {
		t.Error("NewKeyRotator without a store succeeded")
	}
}
