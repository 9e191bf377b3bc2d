package app_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func newKey(t *testing.T) string {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

func storeWith(t *testing.T, pool *pgxpool.Pool, key string) *provisionerstore.Store {
	t.Helper()
	k, err := seal.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(k)
	if err != nil {
		t.Fatal(err)
	}
	st, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: s})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readsAll tells whether every account and active user seed opens with
// the store's key.
func readsAll(ctx context.Context, st *provisionerstore.Store) error {
	if _, err := st.ListAccounts(ctx); err != nil {
		return err
	}
	_, err := st.ActiveUsers(ctx)
	return err
}

// provisioner reseal moves every seed to the new key in one transaction:
// afterwards the store reads everything with the new key and nothing with
// the old; a second run changes nothing; a record neither key opens stops
// it with nothing changed; the same key twice or a bad key is refused.
func TestReseal(t *testing.T) {
	e := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := pgtest.Pool(t, e.dsn)
	oldStore := storeWith(t, pool, e.key)
	op, err := oldStore.Operator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		kp, _ := nkeys.CreateUser()
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		if _, _, err := oldStore.CreateUser(ctx, provisioning.User{PubKey: pub, AccountPubKey: op.ControlAccount, Kind: provisioning.UserBackend,
			Name: "backend-" + string(rune('a'+i)), Seed: seed, JWT: "jwt", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := readsAll(ctx, oldStore); err != nil {
		t.Fatal(err)
	}
	next := newKey(t)

	// Refusals first, changing nothing.
	t.Setenv("NEW_ACCOUNT_SEED_ENCRYPTION_KEY", e.key)
	if code, _, errs := runCLI("reseal"); code != 1 || !strings.Contains(errs, "nothing to rotate") {
		t.Fatalf("same key: %d %s", code, errs)
	}
	t.Setenv("NEW_ACCOUNT_SEED_ENCRYPTION_KEY", "short")
	if code, _, errs := runCLI("reseal"); code != 1 || !strings.Contains(errs, "NEW_ACCOUNT_SEED_ENCRYPTION_KEY") {
		t.Fatalf("bad new key: %d %s", code, errs)
	}
	if err := readsAll(ctx, oldStore); err != nil {
		t.Fatalf("a refused reseal changed seeds: %v", err)
	}

	// A record no key opens: the whole run is rolled back.
	var victim string
	if err := pool.QueryRow(ctx, `SELECT user_pub_key FROM nats_users ORDER BY user_pub_key DESC LIMIT 1`).Scan(&victim); err != nil {
		t.Fatal(err)
	}
	var saved []byte
	if err := pool.QueryRow(ctx, `SELECT seed_enc FROM nats_users WHERE user_pub_key = $1`, victim).Scan(&saved); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE nats_users SET seed_enc = $1 WHERE user_pub_key = $2`, []byte("garbage-that-opens-with-no-key-at-all"), victim); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NEW_ACCOUNT_SEED_ENCRYPTION_KEY", next)
	if code, _, errs := runCLI("reseal"); code != 1 || !strings.Contains(errs, victim) || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("unreadable record: %d %s", code, errs)
	}
	if _, err := oldStore.ListAccounts(ctx); err != nil {
		t.Fatalf("a failed reseal left accounts under another key: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE nats_users SET seed_enc = $1 WHERE user_pub_key = $2`, saved, victim); err != nil {
		t.Fatal(err)
	}
	if err := readsAll(ctx, oldStore); err != nil {
		t.Fatalf("a failed reseal changed seeds: %v", err)
	}

	// The rotation.
	code, out, errs := runCLI("reseal")
	if code != 0 || !strings.Contains(out, "resealed 2 account seeds and 3 user seeds") {
		t.Fatalf("reseal: %d %q %s", code, out, errs)
	}
	if err := readsAll(ctx, storeWith(t, pool, next)); err != nil {
		t.Fatalf("after reseal the new key does not read everything: %v", err)
	}
	if _, err := oldStore.ListAccounts(ctx); err == nil {
		t.Fatal("after reseal the old key still reads the accounts")
	}
	code, out, _ = runCLI("reseal")
	if code != 0 || !strings.Contains(out, "resealed 0 account seeds and 0 user seeds") || !strings.Contains(out, "5 were already sealed with it") {
		t.Fatalf("second reseal: %d %q", code, out)
	}
	if code, out, _ := runCLI("reseal", "-h"); code != 0 || !strings.Contains(out, "NEW_ACCOUNT_SEED_ENCRYPTION_KEY") {
		t.Fatalf("reseal -h: %d %s", code, out)
	}
}
