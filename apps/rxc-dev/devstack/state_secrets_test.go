package devstack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state folder made before the operator secret key existed gets one at
// its next start, kept from then on; the other secrets stay as they were.
func TestStateAddsTheOperatorSecretKey(t *testing.T) {
	dir := t.TempDir()
	old := `{"accountSeedEncryptionKey":"a","provisionerSharedSecret":"b","postgresPassword":"c"}`
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := st.secrets.OperatorSecretEncryptionKey
	st.close()
	if len(key) < 40 || st.secrets.AccountSeedEncryptionKey != "a" || st.secrets.PostgresPassword != "c" {
		t.Fatalf("secrets after the upgrade: %+v", st.secrets)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved secrets
	if err := json.Unmarshal(raw, &saved); err != nil || saved.OperatorSecretEncryptionKey != key {
		t.Fatalf("secrets.json keeps %q, want %q (%v)", saved.OperatorSecretEncryptionKey, key, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "secrets.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets.json mode %v, want 0600", fi.Mode().Perm())
	}
	st, err = openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if st.secrets.OperatorSecretEncryptionKey != key {
		t.Error("the key changed at the next start")
	}
}

// The first start creates secrets.json and operator.txt; either one lost
// while the state folder holds a database stops the start, naming it
// (the database was made with what it held), and creates nothing.
func TestStateRefusesAFileLostBesideADatabase(t *testing.T) {
	dir := t.TempDir()
	st, err := openState(dir)
	if err != nil {
		t.Fatalf("first start: %v", err)
	}
	st.close()
	if err := os.MkdirAll(filepath.Join(dir, "pg", "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pg", "data", "PG_VERSION"), []byte("17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"secrets.json", "operator.txt"} {
		p := filepath.Join(dir, name)
		kept, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("the first start did not create %s: %v", name, err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		st, err := openState(dir)
		if err == nil {
			st.close()
			t.Fatalf("started with %s lost beside a database", name)
		}
		if !strings.Contains(err.Error(), p+" is missing but") {
			t.Errorf("%s lost: error %q does not name it", name, err)
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a refused start created a new %s", name)
		}
		if err := os.WriteFile(p, kept, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Positive control: both files back, the folder opens again.
	st, err = openState(dir)
	if err != nil {
		t.Fatalf("with both files back: %v", err)
	}
	st.close()
}
