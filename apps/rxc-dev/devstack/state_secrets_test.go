package devstack

import (
	"encoding/json"
	"os"
	"path/filepath"
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
