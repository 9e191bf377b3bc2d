package provisionerstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/storetest"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var _ provisioning.Store = (*provisionerstore.Store)(nil)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func newSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	key := make([]byte, seal.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newStore(t *testing.T, pool *pgxpool.Pool, sealer *seal.Sealer) *provisionerstore.Store {
	t.Helper()
	s, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// migratedPool returns a pool on a fresh database with the provisioner schema.
func migratedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	if _, err := migrate.Apply(ctx(t), pool, "provisioner", migrations.Provisioner); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return newStore(t, migratedPool(t), newSealer(t))
	})
}

func TestNewRequiresPoolAndSealer(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]provisionerstore.Config{
		"empty":     {},
		"no sealer": {Pool: &pgxpool.Pool{}},
		"no pool":   {Sealer: newSealer(t)},
	} {
		if _, err := provisionerstore.New(cfg); err == nil {
			t.Errorf("New(%s) succeeded, want an error", name)
		}
	}
}

var (
	t0       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	opKey    = "OAOPERATOR" + strings.Repeat("X", 46)
	sysKey   = "ASYSTEM" + strings.Repeat("S", 49)
	ctlKey   = "ACONTROL" + strings.Repeat("C", 48)
	acmeKey  = "AACME" + strings.Repeat("A", 51)
	otherKey = "AOTHER" + strings.Repeat("O", 50)
	userKey  = "USENSOR" + strings.Repeat("U", 49)
)

func seedOf(s string) []byte { return []byte("SA" + s + strings.Repeat("Q", 40)) }

// populate stores an operator, a tenant account and a sensor user with
// recognisable seeds.
func populate(t *testing.T, s *provisionerstore.Store) map[string][]byte {
	t.Helper()
	seeds := map[string][]byte{sysKey: seedOf("SYSSEED"), ctlKey: seedOf("CTLSEED"), acmeKey: seedOf("ACMESEED"), userKey: seedOf("USERSEED")}
	op := provisioning.Operator{PubKey: opKey, Name: "rxc", JWT: "op", SystemAccount: sysKey, ControlAccount: ctlKey, CreatedAt: t0}
	sys := provisioning.Account{PubKey: sysKey, Name: "SYS", Seed: seeds[sysKey], JWT: "sys"}
	ctl := provisioning.Account{PubKey: ctlKey, Name: "CONTROL", Seed: seeds[ctlKey], JWT: "ctl"}
	if err := s.InitOperator(ctx(t), op, sys, ctl); err != nil {
		t.Fatal(err)
	}
	acct, _, err := s.CreateTenantAccount(ctx(t), provisioning.Account{PubKey: acmeKey, Kind: provisioning.KindTenant, TenantID: "acme", Name: "Acme", Seed: seeds[acmeKey], JWT: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateUser(ctx(t), provisioning.User{PubKey: userKey, AccountPubKey: acct.PubKey, Kind: provisioning.UserSensor,
		TenantID: "acme", SensorID: "s1", Name: "s1", Seed: seeds[userKey], JWT: "user"}); err != nil {
		t.Fatal(err)
	}
	return seeds
}

// The database alone must not give away a seed.
func TestSeedsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	sealer := newSealer(t)
	seeds := populate(t, newStore(t, pool, sealer))

	rows, err := pool.Query(ctx(t), `SELECT account_id, seed_enc FROM nats_accounts UNION ALL SELECT user_pub_key, seed_enc FROM nats_users`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for rows.Next() {
		var k string
		var enc []byte
		if err := rows.Scan(&k, &enc); err != nil {
			t.Fatal(err)
		}
		got[k] = enc
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(seeds) {
		t.Fatalf("found %d sealed seeds, want %d", len(got), len(seeds))
	}
	for k, enc := range got {
		clear := seeds[k]
		if bytes.Contains(enc, clear) || bytes.Contains(enc, clear[2:12]) {
			t.Errorf("seed_enc of %s contains its clear seed", k)
		}
		if plain, err := sealer.Open(enc, []byte(k)); err != nil || !bytes.Equal(plain, clear) {
			t.Errorf("seed_enc of %s does not open to its seed with its key as additional data: %v", k, err)
		}
	}
	var leaked bool
	for _, table := range []string{"nats_accounts", "nats_users", "nats_operator"} {
		for _, sd := range seeds {
			// Any text column holding the seed would show up in the row's text form.
			if err := pool.QueryRow(ctx(t), `SELECT EXISTS (SELECT 1 FROM `+table+` t WHERE strpos(t::text, $1) > 0)`, string(sd)).Scan(&leaked); err != nil {
				t.Fatal(err)
			}
			if leaked {
				t.Errorf("a row of %s holds a clear seed", table)
			}
		}
	}
}

// A sealed seed copied onto another row must not open there.
func TestSealedSeedIsBoundToItsRow(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	s := newStore(t, pool, newSealer(t))
	seeds := populate(t, s)
	if _, _, err := s.CreateTenantAccount(ctx(t), provisioning.Account{PubKey: otherKey, TenantID: "other", Name: "Other", Seed: seedOf("OTHER"), JWT: "o"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `UPDATE nats_accounts SET seed_enc = (SELECT seed_enc FROM nats_accounts WHERE account_id = $1) WHERE account_id = $2`, acmeKey, otherKey); err != nil {
		t.Fatal(err)
	}
	_, err := s.Account(ctx(t), otherKey)
	if !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("Account with a seed copied from another row: err = %v, want seal.ErrOpen", err)
	}
	if errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("an unreadable seed is reported as not found")
	}
	if strings.Contains(err.Error(), string(seeds[acmeKey])) {
		t.Errorf("error quotes the seed")
	}
	if a, err := s.Account(ctx(t), acmeKey); err != nil || !bytes.Equal(a.Seed, seeds[acmeKey]) {
		t.Errorf("source row no longer opens: %v", err)
	}
}

func TestWrongKeyCannotOpenSeeds(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	populate(t, newStore(t, pool, newSealer(t)))
	other := newStore(t, pool, newSealer(t))
	tests := []struct {
		name string
		call func() error
	}{
		{"Account", func() error { _, err := other.Account(ctx(t), acmeKey); return err }},
		{"TenantAccount", func() error { _, err := other.TenantAccount(ctx(t), "acme"); return err }},
		{"ListAccounts", func() error { _, err := other.ListAccounts(ctx(t)); return err }},
		{"ActiveSensorUser", func() error { _, err := other.ActiveSensorUser(ctx(t), "acme", "s1"); return err }},
	}
	for _, tc := range tests {
		err := tc.call()
		if !errors.Is(err, seal.ErrOpen) {
			t.Errorf("%s with another key: err = %v, want seal.ErrOpen", tc.name, err)
		}
	}
}

func TestPingFailsWhenDatabaseIsGone(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	s := newStore(t, pool, newSealer(t))
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	pool.Close()
	if err := s.Ping(ctx(t)); err == nil {
		t.Errorf("Ping on a closed pool = nil, want an error")
	}
}

// `psql -f migrations/001_init.sql` and `provisioner migrate` must both work,
// in either order: an operator may bootstrap by hand and upgrade later.
func TestPlainSQLThenMigrate(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(filepath.Join("..", "..", "..", "migrations", "001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := migrations.Provisioner.Open("001_init.sql")
	if err != nil {
		t.Fatalf("embedded 001_init.sql: %v", err)
	}
	embedded.Close()

	tests := []struct {
		name  string
		apply func(t *testing.T, dsn string, pool *pgxpool.Pool)
	}{
		{"exec file text", func(t *testing.T, _ string, pool *pgxpool.Pool) {
			if _, err := pool.Exec(ctx(t), string(text)); err != nil {
				t.Fatalf("exec 001_init.sql: %v", err)
			}
		}},
		{"psql -f", func(t *testing.T, dsn string, _ *pgxpool.Pool) {
			psql := findPsql(t)
			out, err := exec.CommandContext(ctx(t), psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", filepath.Join("..", "..", "..", "migrations", "001_init.sql")).CombinedOutput()
			if err != nil {
				t.Fatalf("psql -f 001_init.sql: %v\n%s", err, out)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			pool := pgtest.Pool(t, dsn)
			tc.apply(t, dsn, pool)
			// Twice by hand is harmless too.
			tc.apply(t, dsn, pool)
			applied, err := migrate.Apply(ctx(t), pool, "provisioner", migrations.Provisioner)
			if err != nil {
				t.Fatalf("migrate after plain SQL: %v", err)
			}
			// 001 is recorded as applied; later files run now.
			if diff := cmp.Diff([]string{"001_init.sql", "002_consumer_names.sql", "003_bounded_revocations.sql", "004_revocation_generation.sql", "005_consumer_nodes.sql"}, applied); diff != "" {
				t.Errorf("applied (-want +got):\n%s", diff)
			}
			applied, err = migrate.Apply(ctx(t), pool, "provisioner", migrations.Provisioner)
			if err != nil || len(applied) != 0 {
				t.Errorf("second migrate = %v, %v; want nothing applied", applied, err)
			}
			s := newStore(t, pool, newSealer(t))
			populate(t, s)
			if _, err := s.ActiveSensorUser(ctx(t), "acme", "s1"); err != nil {
				t.Errorf("store on the hand-applied schema: %v", err)
			}
		})
	}
}

// findPsql looks where pgtest looks for the server binaries.
func findPsql(t *testing.T) string {
	t.Helper()
	var candidates []string
	if d := os.Getenv("PG_BIN"); d != "" {
		candidates = append(candidates, filepath.Join(d, "psql"))
	}
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	candidates = append(candidates, globbed...)
	if p, err := exec.LookPath("psql"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode()&0o111 != 0 {
			return c
		}
	}
	t.Skip("psql not installed")
	return ""
}

// The contract checks what callers see; this checks the table itself: the
// losers of a create race leave no row behind.
func TestConcurrentCreatesLeaveOneRow(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	s := newStore(t, pool, newSealer(t))
	populate(t, s)
	const n = 100
	errs := make(chan error, 2*n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			_, _, err := s.CreateTenantAccount(context.Background(), provisioning.Account{
				PubKey: fmt.Sprintf("ARACE%051d", i), TenantID: "globex", Name: "Globex", Seed: seedOf("G"), JWT: "g"})
			errs <- err
		}()
		go func() {
			<-start
			_, _, err := s.CreateUser(context.Background(), provisioning.User{
				PubKey: fmt.Sprintf("URACE%051d", i), AccountPubKey: acmeKey, Kind: provisioning.UserSensor,
				TenantID: "acme", SensorID: "s2", Name: "s2", Seed: seedOf("U"), JWT: "u"})
			errs <- err
		}()
	}
	close(start)
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ query, what string }{
		{`SELECT count(*) FROM nats_accounts WHERE tenant_id = 'globex'`, "globex accounts"},
		{`SELECT count(*) FROM nats_users WHERE sensor_id = 's2'`, "s2 users"},
	} {
		var got int
		if err := pool.QueryRow(ctx(t), c.query).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != 1 {
			t.Errorf("%s rows = %d, want 1", c.what, got)
		}
	}
}

// An upgrade from the first release: two pairs that spell one consumer name
// both had users. The migration gives the name to the earliest user's pair;
// the other pair has no claim (serve then revokes its user).
func TestConsumerNamesMigrationFromFirstRelease(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pool := pgtest.Pool(t, dsn)
	text, err := os.ReadFile(filepath.Join("..", "..", "..", "migrations", "001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), string(text)); err != nil {
		t.Fatalf("exec 001_init.sql: %v", err)
	}
	// This release's store writes nats_users.expiring (003, which applies
	// it again harmlessly): the first release's rows are written through it.
	if _, err := pool.Exec(ctx(t), `ALTER TABLE nats_users ADD COLUMN IF NOT EXISTS expiring boolean NOT NULL DEFAULT false`); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, pool, newSealer(t))
	populate(t, s) // tenant acme with sensor s1
	if _, _, err := s.CreateTenantAccount(ctx(t), provisioning.Account{PubKey: "AEU" + strings.Repeat("X", 53), Kind: provisioning.KindTenant,
		TenantID: "acme-eu", Name: "Acme EU", Seed: seedOf("EUSEED"), JWT: "eu"}); err != nil {
		t.Fatal(err)
	}
	// acme-eu/s1 first, then acme/eu-s1: both are cmd-acme-eu-s1.
	for i, p := range [][2]string{{"acme-eu", "s1"}, {"acme", "eu-s1"}} {
		acct, err := s.TenantAccount(ctx(t), p[0])
		if err != nil {
			t.Fatal(err)
		}
		u := provisioning.User{PubKey: fmt.Sprintf("U%d%s", i, strings.Repeat("Y", 54)), AccountPubKey: acct.PubKey, Kind: provisioning.UserSensor,
			TenantID: p[0], SensorID: p[1], Name: p[1], Seed: seedOf("USEED"), JWT: "u", CreatedAt: t0.Add(time.Duration(i+1) * time.Hour)}
		if _, _, err := s.CreateUser(ctx(t), u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := migrate.Apply(ctx(t), pool, "provisioner", migrations.Provisioner); err != nil {
		t.Fatal(err)
	}
	claims, err := s.ConsumerClaims(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range claims {
		got[c.Consumer] = c.TenantID + "/" + c.SensorID
	}
	want := map[string]string{"cmd-acme-s1": "acme/s1", "cmd-acme-eu-s1": "acme-eu/s1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claims after migration (-want +got):\n%s", d)
	}
	if err := s.ClaimConsumer(ctx(t), "cmd-acme-eu-s1", "acme", "eu-s1"); !errors.Is(err, provisioning.ErrConsumerNameTaken) {
		t.Errorf("later pair's claim = %v, want ErrConsumerNameTaken", err)
	}
}
