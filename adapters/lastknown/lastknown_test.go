package lastknown_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/lastknown"
	"github.com/rxc-project/rxc/adapters/natsjwt"
	"github.com/rxc-project/rxc/core/provisioning"
)

type operator struct {
	pub    string
	signer *natsjwt.Signer
}

func newOperator(t *testing.T) operator {
	t.Helper()
	pub, seed, err := natsjwt.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := natsjwt.New(natsjwt.Config{OperatorSeed: seed, Stream: "RXC_CMD",
		ControlJetStream: natsjwt.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ctl, _, err := s.NewAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	if s, err = s.WithControlAccount(ctl); err != nil {
		t.Fatal(err)
	}
	return operator{pub: pub, signer: s}
}

func (o operator) account(t *testing.T, kind provisioning.AccountKind, pub string, revoked ...string) provisioning.Account {
	t.Helper()
	if pub == "" {
		var err error
		if pub, _, err = o.signer.NewAccountKey(); err != nil {
			t.Fatal(err)
		}
	}
	spec := provisioning.AccountSpec{PubKey: pub, Name: "acme", Kind: kind, TenantID: "acme"}
	if kind != provisioning.KindTenant {
		spec.TenantID = ""
	}
	for _, u := range revoked {
		spec.Revocations = append(spec.Revocations, provisioning.Revocation{AccountPubKey: pub, UserPubKey: u, RevokedAt: time.Now().UTC().Truncate(time.Second)})
	}
	tok, err := o.signer.SignAccount(spec)
	if err != nil {
		t.Fatal(err)
	}
	return provisioning.Account{PubKey: pub, Kind: kind, JWT: tok}
}

func userKey(t *testing.T) string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub
}

func TestSnapshotRoundTrip(t *testing.T) {
	op := newOperator(t)
	path := filepath.Join(t.TempDir(), "state", "snapshot.json")
	s, err := lastknown.Open(path, op.pub)
	if err != nil {
		t.Fatal(err)
	}
	sys := op.account(t, provisioning.KindSystem, "")
	acme := op.account(t, provisioning.KindTenant, "")
	s.Observe(sys)
	s.Observe(acme)
	if err := s.Save(time.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	again, err := lastknown.Open(path, op.pub)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := again.Get(acme.PubKey); !ok || tok != acme.JWT {
		t.Fatal("reopened snapshot lacks the tenant account")
	}
	if tok, ok := again.System(); !ok || tok != sys.JWT {
		t.Fatal("reopened snapshot lacks the system account")
	}
	if again.LoadedFrom().IsZero() || again.Len() != 2 {
		t.Fatalf("loaded %d accounts written at %v", again.Len(), again.LoadedFrom())
	}
}

// A JWT issued earlier never replaces a later one: a stale read cannot
// undo a revocation.
func TestOlderJWTNeverReplacesNewer(t *testing.T) {
	op := newOperator(t)
	s, _ := lastknown.Open("", op.pub)
	before := op.account(t, provisioning.KindTenant, "")
	// JWT issue times have a resolution of a second.
	time.Sleep(1100 * time.Millisecond)
	u1, u2 := userKey(t), userKey(t)
	revoked := op.account(t, provisioning.KindTenant, before.PubKey, u1)
	s.Observe(revoked)
	s.Observe(before)
	if tok, _ := s.Get(before.PubKey); tok != revoked.JWT {
		t.Fatal("an earlier JWT replaced the later one with the revocation")
	}
	fresh := op.account(t, provisioning.KindTenant, before.PubKey, u1, u2)
	s.Observe(fresh)
	if tok, _ := s.Get(before.PubKey); tok != fresh.JWT {
		t.Fatal("a JWT issued later (or in the same second) did not replace the held one")
	}
}

// Entries the operator did not sign, or filed under another key, are
// never served; a file of another operator or a damaged file is refused.
func TestForeignAndDamagedSnapshots(t *testing.T) {
	op, other := newOperator(t), newOperator(t)
	dir := t.TempDir()
	good := op.account(t, provisioning.KindTenant, "")
	forged := other.account(t, provisioning.KindTenant, "")
	misfiled := op.account(t, provisioning.KindTenant, "")
	write := func(name string, v any) string {
		p := filepath.Join(dir, name)
		data, _ := json.Marshal(v)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("mixed.json", map[string]any{"version": 1, "operator": op.pub, "accounts": map[string]string{
		good.PubKey: good.JWT, forged.PubKey: forged.JWT, "AFAKE": misfiled.JWT, misfiled.PubKey: "not a jwt",
	}})
	s, err := lastknown.Open(p, op.pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(good.PubKey); !ok || s.Len() != 1 {
		t.Fatalf("kept %v, want the operator's own entry alone", s.Keys())
	}
	// Observe refuses the same.
	s.Observe(forged)
	if _, ok := s.Get(forged.PubKey); ok {
		t.Fatal("a JWT of another operator was taken")
	}

	for name, body := range map[string]any{
		"foreign.json": map[string]any{"version": 1, "operator": other.pub, "accounts": map[string]string{}},
		"version.json": map[string]any{"version": 9, "operator": op.pub},
	} {
		if _, err := lastknown.Open(write(name, body), op.pub); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	damaged := filepath.Join(dir, "damaged.json")
	os.WriteFile(damaged, []byte(`{"version":1,`), 0o600)
	if _, err := lastknown.Open(damaged, op.pub); err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Errorf("damaged file: %v", err)
	}
}
