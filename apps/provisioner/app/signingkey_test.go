package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// resolverJWT is the account JWT the provisioner's resolver answers.
// serveAccountJWT puts tok in the database as the account's JWT, waits
// until the resolver answers it, and restarts nats-server, which asks the
// resolver when it loads the account.
func serveAccountJWT(t *testing.T, s *provisionertest.Stack, pool *pgxpool.Pool, accountID, tok string) {
	t.Helper()
	h := sha256.Sum256([]byte(tok))
	if _, err := pool.Exec(context.Background(), `UPDATE nats_accounts SET jwt = $2, jwt_hash = $3 WHERE account_id = $1`, accountID, tok, hex.EncodeToString(h[:])); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); resolverJWT(t, s, accountID) != tok; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the resolver never answered the JWT put in the database")
		}
	}
	s.RestartNATS()
}

func resolverJWT(t *testing.T, s *provisionertest.Stack, pk string) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/jwt/v1/accounts/" + pk)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resolver %s: status %d: %s", pk, resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body))
}

// issuers maps every account the store holds to the key that signed the
// JWT the resolver answers for it.
func issuers(t *testing.T, s *provisionertest.Stack, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT account_id FROM nats_accounts`)
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for rows.Next() {
		var pk string
		if err := rows.Scan(&pk); err != nil {
			t.Fatal(err)
		}
		pks = append(pks, pk)
	}
	rows.Close()
	out := map[string]string{}
	for _, pk := range pks {
		c, err := jwt.DecodeAccountClaims(resolverJWT(t, s, pk))
		if err != nil {
			t.Fatalf("account %s: %v", pk, err)
		}
		out[pk] = c.Issuer
	}
	return out
}

func allIssuedBy(t *testing.T, got map[string]string, key string) {
	t.Helper()
	if len(got) < 3 {
		t.Fatalf("%d accounts, want SYS, CONTROL and a tenant", len(got))
	}
	for pk, iss := range got {
		if iss != key {
			t.Errorf("account %s issued by %s, want %s", pk, iss, key)
		}
	}
}

func seedPub(t *testing.T, path string) (string, nkeys.KeyPair) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub, kp
}

// fragmentSigningKeys reads the operator JWT of a nats-server fragment.
func fragmentSigningKeys(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`operator: "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("fragment %s has no operator:\n%s", path, b)
	}
	_, spec, err := jwtauthority.ParseOperator(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return spec.SigningKeys
}

// signingKeyStack starts a provisioner that signs accounts with an
// operator signing key (the identity key kept apart) and opens a pool on its
// database.
func signingKeyStack(t *testing.T) (*provisionertest.Stack, *pgxpool.Pool) {
	t.Helper()
	s := provisionertest.Start(t, provisionertest.Options{SigningKey: true})
	pool := s.Pool()
	return s, pool
}

// The operator's identity key stays offline: serve signs every account with
// a signing key the operator JWT lists. Rotating that key (add the new one,
// restart nats-servers, serve with the new one, which re-signs every
// account, remove the old one, restart nats-servers) keeps sensors
// connected throughout, and afterwards nats-server refuses an account signed
// by the removed key, and serve refuses to run with it.
func TestOperatorSigningKeyRotation(t *testing.T) {
	s, pool := signingKeyStack(t)
	t.Setenv("PG_DSN", s.Config.PGDSN)
	t.Setenv("ACCOUNT_SEED_ENCRYPTION_KEY", s.Config.AccountSeedEncryptionKey)

	idPub, spec, err := jwtauthority.ParseOperator(s.Operator.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if idPub != s.Operator.PubKey || len(spec.SigningKeys) != 1 || spec.SigningKeys[0] == idPub {
		t.Fatalf("operator %s has signing keys %v, want one other than the identity key", idPub, spec.SigningKeys)
	}
	s1 := spec.SigningKeys[0]
	if pub, _ := seedPub(t, s.Config.OperatorSeedPath); pub != s1 {
		t.Fatalf("OPERATOR_SEED_PATH holds %s, want the signing key %s", pub, s1)
	}
	if pub, _ := seedPub(t, s.IdentitySeedPath); pub != idPub {
		t.Fatalf("the identity seed file holds %s, want %s", pub, idPub)
	}
	// Offline: serve restarts and works without the identity seed.
	offline := filepath.Join(t.TempDir(), "identity.nk")
	if err := os.Rename(s.IdentitySeedPath, offline); err != nil {
		t.Fatal(err)
	}
	s.StopServe()
	s.StartServe()
	s.WaitNATSReady()

	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	allIssuedBy(t, issuers(t, s, pool), s1)
	sensorConnects(t, s, u, "sensor of an account signed by the signing key")

	// A signing key cannot change the signing keys; an unknown key is not
	// removed; the only key in use is not removed while accounts use it.
	s2Path := filepath.Join(s.Dir, "keys", "signing-2.nk")
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"add-signing-key", "--identity-seed", s.Config.OperatorSeedPath, "--out", s2Path}, "not the identity key"},
		{[]string{"remove-signing-key", "--identity-seed", offline, "--key", idPub}, "is not a signing key"},
		{[]string{"remove-signing-key", "--identity-seed", offline, "--key", s1}, "still signed by " + s1},
	}
	for _, r := range refusals {
		if code, _, errs := runCLI(r.args...); code != 1 || !strings.Contains(errs, r.want) {
			t.Fatalf("%v: exit %d, %q; want 1 and %q", r.args, code, errs, r.want)
		}
	}
	if code, _, errs := runCLI("add-signing-key", "--identity-seed", offline); code != 2 || !strings.Contains(errs, "--out") {
		t.Fatalf("add-signing-key without --out: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(s2Path); err == nil {
		t.Fatal("a refused add-signing-key left a seed file")
	}

	// 1. Add the new key; nats-servers restart trusting both.
	code, out, errs := runCLI("add-signing-key", "--identity-seed", offline, "--out", s2Path, "--nats-config", s.NATSConfigPath)
	if code != 0 {
		t.Fatalf("add-signing-key: exit %d: %s", code, errs)
	}
	s2, _ := seedPub(t, s2Path)
	if !strings.Contains(out, s2) {
		t.Errorf("add-signing-key output does not name %s:\n%s", s2, out)
	}
	if st, _ := os.Stat(s2Path); st.Mode().Perm() != 0o600 {
		t.Errorf("new signing seed mode %04o, want 0600", st.Mode().Perm())
	}
	if got, want := fragmentSigningKeys(t, s.NATSConfigPath), slices.Sorted(slices.Values([]string{s1, s2})); !slices.Equal(got, want) {
		t.Fatalf("fragment's signing keys %v, want %v", got, want)
	}
	if code, _, errs := runCLI("add-signing-key", "--identity-seed", offline, "--out", s2Path); code != 1 || !strings.Contains(errs, "exists") {
		t.Fatalf("add-signing-key over an existing seed file: exit %d, %q", code, errs)
	}
	s.RestartNATS()
	sensorConnects(t, s, u, "during the overlap, sensor of an account signed by the old key")

	// 2. Serve with the new key: every account is re-signed at start.
	s.StopServe()
	s.Config.OperatorSeedPath = s2Path
	s.StartServe()
	s.WaitNATSReady()
	allIssuedBy(t, issuers(t, s, pool), s2)
	sensorConnects(t, s, u, "sensor of an account re-signed by the new key")

	// 3. Remove the old key; nats-servers restart trusting the new one only.
	if code, out, errs := runCLI("remove-signing-key", "--identity-seed", offline, "--key", s1, "--nats-config", s.NATSConfigPath); code != 0 || !strings.Contains(out, s1) {
		t.Fatalf("remove-signing-key: exit %d: %s%s", code, out, errs)
	}
	if got := fragmentSigningKeys(t, s.NATSConfigPath); !slices.Equal(got, []string{s2}) {
		t.Fatalf("fragment's signing keys %v, want [%s]", got, s2)
	}
	s.RestartNATS()
	sensorConnects(t, s, u, "after the rotation, sensor of an account signed by the new key")
	account(t, s, "globex")
	if _, err := connectSensor(t, s, sensorUser(t, s, "globex", "g1")); err != nil {
		t.Fatalf("sensor of a tenant created after the rotation: %v", err)
	}

	// An account JWT signed by the removed key is refused by nats-server.
	s1Path := filepath.Join(s.Dir, "keys", "operator.nk")
	_, s1Key := seedPub(t, s1Path)
	claims, err := jwt.DecodeAccountClaims(resolverJWT(t, s, u.AccountID))
	if err != nil {
		t.Fatal(err)
	}
	old, err := claims.Encode(s1Key)
	if err != nil {
		t.Fatal(err)
	}
	serveAccountJWT(t, s, pool, u.AccountID, old)
	if _, err := connectSensor(t, s, u); err == nil {
		t.Fatal("nats-server accepted a sensor whose account JWT is signed by the removed signing key")
	}

	// serve refuses to run with the removed key, naming the keys it knows.
	cfg := s.Config
	cfg.OperatorSeedPath = s1Path
	cfg.ListenAddr = "127.0.0.1:0"
	cfg.ResolverSnapshotPath = ""
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if srv, err := app.NewServer(ctx, cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), s2) || !strings.Contains(err.Error(), "but the store's operator is") {
		if srv != nil {
			t.Fatal("serve started with a removed signing key")
		}
		t.Fatalf("serve with a removed signing key: %v", err)
	}
}
