package lastknown_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/lastknown"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/provisioning"
)

type operator struct {
	pub    string
	seed   []byte
	signer *jwtauthority.Signer
}

func newOperator(t *testing.T) operator {
	t.Helper()
	pub, seed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	return operator{pub: pub, seed: seed, signer: signerFor(t, seed)}
}

// signerFor is a signer on the operator or signing key seed, with a
// control account.
func signerFor(t *testing.T, seed []byte) *jwtauthority.Signer {
	t.Helper()
	s, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: seed, Stream: "RXC_CMD",
		ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
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
	return s
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

// signingOperator is an operator whose identity key signs an operator JWT
// listing keys; each signing key signs accounts with its own signer.
func signingOperator(t *testing.T, keys int) (idSeed []byte, idPub string, signers []operator) {
	t.Helper()
	idPub, idSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	for range keys {
		pub, seed, err := jwtauthority.NewSigningKey()
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, operator{pub: pub, signer: signerFor(t, seed)})
	}
	return idSeed, idPub, signers
}

func operatorJWT(t *testing.T, idSeed []byte, sys string, keys ...string) string {
	t.Helper()
	tok, err := jwtauthority.SignOperatorSpec(idSeed, jwtauthority.OperatorSpec{Name: "OP", SystemAccount: sys, SigningKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// With signing keys the copy keeps accounts signed by any key the
// operator JWT lists, across a restart before the database answers, and
// drops those of a key the operator no longer lists; a foreign operator's
// snapshot, or one whose operator JWT was tampered with, is refused.
func TestSnapshotTrustsTheOperatorsSigningKeys(t *testing.T) {
	idSeed, idPub, k := signingOperator(t, 2)
	foreign := newOperator(t)
	path := filepath.Join(t.TempDir(), "snapshot.json")
	sys := k[0].account(t, provisioning.KindSystem, "")
	byOld := k[0].account(t, provisioning.KindTenant, "")
	byNew := k[1].account(t, provisioning.KindTenant, "")
	alien := foreign.account(t, provisioning.KindTenant, "")

	s, err := lastknown.Open(path, k[1].pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Trust(operatorJWT(t, idSeed, sys.PubKey, k[0].pub, k[1].pub)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []provisioning.Account{sys, byOld, byNew, alien} {
		s.Observe(a)
	}
	if _, ok := s.Get(alien.PubKey); ok || s.Len() != 3 {
		t.Fatalf("held %d accounts (foreign one: %v), want the 3 signed by the operator's keys", s.Len(), ok)
	}
	if err := s.Save(time.Now()); err != nil {
		t.Fatal(err)
	}

	// Restart before the database answers, with either key.
	for _, key := range []string{k[0].pub, k[1].pub} {
		again, err := lastknown.Open(path, key)
		if err != nil {
			t.Fatalf("reopen with %s: %v", key, err)
		}
		if again.Len() != 3 {
			t.Fatalf("reopened with %s: %d accounts, want 3", key, again.Len())
		}
	}

	// The operator drops the old key: its accounts go.
	again, _ := lastknown.Open(path, k[1].pub)
	if err := again.Trust(operatorJWT(t, idSeed, sys.PubKey, k[1].pub)); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Get(byOld.PubKey); ok {
		t.Fatal("kept an account signed by a removed signing key")
	}
	if _, ok := again.Get(byNew.PubKey); !ok {
		t.Fatal("dropped an account signed by a listed signing key")
	}
	again.Observe(byOld)
	if _, ok := again.Get(byOld.PubKey); ok {
		t.Fatal("observed an account signed by a removed signing key")
	}

	// Another operator's JWT is refused once the snapshot knows its own.
	otherSeed, _, _ := signingOperator(t, 0)
	if err := again.Trust(operatorJWT(t, otherSeed, sys.PubKey, k[1].pub)); err == nil {
		t.Fatal("a snapshot of one operator trusted another")
	}

	// A tampered operator JWT in the file is refused.
	raw, _ := os.ReadFile(path)
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f["operator"] != idPub {
		t.Fatalf("snapshot names operator %v, want %s", f["operator"], idPub)
	}
	tok := f["operatorJwt"].(string)
	f["operatorJwt"] = tok[:len(tok)-4] + "AAAA"
	bad, _ := json.Marshal(f)
	badPath := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(badPath, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := lastknown.Open(badPath, k[1].pub); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("tampered operator JWT: %v", err)
	}
}

// Observe reads only the few claims it files a JWT by, but the signature
// still covers all of it: a JWT of the operator whose revocations (or issue
// time) were changed afterwards is not kept, and neither is a JWT of
// another type signed by the operator's key.
func TestObserveChecksTheWholeSignature(t *testing.T) {
	op := newOperator(t)
	s, _ := lastknown.Open("", op.pub)
	u1, u2 := userKey(t), userKey(t)
	good := op.account(t, provisioning.KindTenant, "", u1, u2)
	parts := strings.Split(good.JWT, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	reencode := func(change func(map[string]any)) string {
		var c map[string]any
		_ = json.Unmarshal(payload, &c)
		change(c)
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(data) + "." + parts[2]
	}
	for name, tok := range map[string]string{
		"a revocation taken out": reencode(func(c map[string]any) {
			delete(c["nats"].(map[string]any)["revocations"].(map[string]any), u1)
		}),
		"a later issue time": reencode(func(c map[string]any) { c["iat"] = claims["iat"].(float64) + 3600 }),
		"the signature cut":  parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4],
		"no signature":       parts[0] + "." + parts[1] + ".",
	} {
		s.Observe(provisioning.Account{PubKey: good.PubKey, Kind: provisioning.KindTenant, JWT: tok})
		if _, ok := s.Get(good.PubKey); ok {
			t.Fatalf("kept a JWT with %s", name)
		}
	}
	// The operator's own JWT (signed by its key), filed under its subject.
	okp, err := nkeys.FromSeed(op.seed)
	if err != nil {
		t.Fatal(err)
	}
	otok, err := jwt.NewOperatorClaims(op.pub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	s.Observe(provisioning.Account{PubKey: op.pub, Kind: provisioning.KindTenant, JWT: otok})
	if _, ok := s.Get(op.pub); ok {
		t.Fatal("kept an operator JWT as an account's")
	}
	// Positive control: the JWT as signed is kept.
	s.Observe(good)
	if tok, ok := s.Get(good.PubKey); !ok || tok != good.JWT {
		t.Fatal("the operator's account JWT as signed was not kept")
	}
}

// verify reads the issue time from the head of the claims when it is
// there: an issue time that the head cuts in two is read from the whole,
// never as the smaller number the head holds (which would let an older JWT
// replace it).
func TestIssueTimeAtTheEdgeOfTheHead(t *testing.T) {
	op := newOperator(t)
	okp, err := nkeys.FromSeed(op.seed)
	if err != nil {
		t.Fatal(err)
	}
	acct, _, err := op.signer.NewAccountKey()
	if err != nil {
		t.Fatal(err)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ed25519-nkey"}`))
	sign := func(pad int, iat int64) string {
		claims := fmt.Sprintf(`{"jti":"x","pad":%q,"iat":%d,"iss":%q,"sub":%q,"nats":{"type":"account","version":2}}`,
			strings.Repeat("p", pad), iat, op.pub, acct)
		tok := header + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
		sig, err := okp.Sign([]byte(tok))
		if err != nil {
			t.Fatal(err)
		}
		return tok + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	// The head is 1,024 base64 characters, 768 bytes: put the issue time's
	// digits across byte 768 ("{"jti":"x","pad":"" is 18 bytes, then the
	// pad, then ","iat":", 8 more).
	const late, early = 1_800_000_999, 1_800_000_500
	for pad := 768 - 18 - 8 - 9; pad <= 768-18-8; pad++ {
		s, _ := lastknown.Open("", op.pub)
		newer := sign(pad, late)
		s.Observe(provisioning.Account{PubKey: acct, Kind: provisioning.KindTenant, JWT: newer})
		s.Observe(provisioning.Account{PubKey: acct, Kind: provisioning.KindTenant, JWT: sign(0, early)})
		if tok, ok := s.Get(acct); !ok || tok != newer {
			t.Fatalf("pad %d: an older JWT replaced one whose issue time crosses the head (or it was not kept)", pad)
		}
	}
}
