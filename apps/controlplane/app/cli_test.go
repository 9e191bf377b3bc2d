package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/internal/pgtest"
)

func runCLI(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := app.Run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	t.Setenv("CA_DIR", dir)
	code, out, errs := runCLI("", "init-ca", "--dns", "controlplane", "--ip", "127.0.0.1")
	if code != 0 || !strings.Contains(out, "sensor CA created") {
		t.Fatalf("init-ca: %d %s %s", code, out, errs)
	}
	for name, want := range map[string]os.FileMode{"ca.key": 0o600, "server.key": 0o600, "ca.crt": 0, "server.crt": 0} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want != 0 && st.Mode().Perm() != want {
			t.Errorf("%s mode %04o, want %04o", name, st.Mode().Perm(), want)
		}
	}
	key1, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	code, out, _ = runCLI("", "init-ca", "--dns", "controlplane", "--replace-server-cert")
	if code != 0 || !strings.Contains(out, "sensor CA kept") {
		t.Fatalf("second init-ca: %d %s", code, out)
	}
	if key2, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(key1, key2) {
		t.Fatal("second init-ca replaced the CA key")
	}
	// Usage mistakes exit 2 in one style and write nothing, not even CA_DIR.
	fresh := filepath.Join(t.TempDir(), "fresh-ca")
	t.Setenv("CA_DIR", fresh)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"init-ca", "--ip", "not-an-ip"}, `controlplane init-ca: --ip "not-an-ip" is not an IP address (-h for help)`},
		{[]string{"init-ca"}, "controlplane init-ca: give the gRPC server certificate's names with --dns and/or --ip (-h for help)"},
		{[]string{"init-ca", "--nope"}, "controlplane init-ca: flag provided but not defined: -nope (-h for help)"},
	} {
		code, _, errs := runCLI("", tc.args...)
		if code != 2 || strings.TrimSpace(errs) != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Fatalf("%v created %s before refusing", tc.args, fresh)
		}
	}
}

func TestCreateOperatorAndMigrate(t *testing.T) {
	t.Setenv("PG_DSN", pgtest.DSN(t))
	if code, out, errs := runCLI("", "migrate"); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("migrate: %d %s %s", code, out, errs)
	}
	if code, out, _ := runCLI("", "migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: %d %s", code, out)
	}
	const pw = "a long enough password"
	code, out, errs := runCLI(pw+"\n", "create-operator", "--email", "Admin@Example.com")
	if code != 0 || !strings.Contains(out, "admin@example.com") {
		t.Fatalf("create-operator: %d %s %s", code, out, errs)
	}
	if strings.Contains(out+errs, pw) {
		t.Fatal("the password was printed")
	}
	// The same address again, also spelled otherwise: a clear message, no SQL.
	for _, email := range []string{"admin@example.com", " ADMIN@example.COM"} {
		code, _, errs := runCLI(pw+"\n", "create-operator", "--email", email)
		if code != 1 || !strings.Contains(errs, "already exists") || !strings.Contains(errs, "nothing was changed") {
			t.Fatalf("duplicate operator %q: %d %s", email, code, errs)
		}
		for _, raw := range []string{"SQLSTATE", "duplicate key", "violates"} {
			if strings.Contains(errs, raw) {
				t.Fatalf("duplicate operator %q: raw database error %q", email, errs)
			}
		}
	}
	if code, _, errs := runCLI("", "create-operator", "--email", "x@example.com"); code != 2 || !strings.Contains(errs, "standard input") {
		t.Fatalf("no password: %d %s", code, errs)
	}
	if code, _, errs := runCLI("short\n", "create-operator", "--email", "y@example.com"); code != 1 || errs == "" {
		t.Fatalf("short password accepted: %d %s", code, errs)
	}
	if code, _, errs := runCLI(pw+"\n", "create-operator"); code != 2 || !strings.Contains(errs, "controlplane create-operator: --email is required (-h for help)") {
		t.Fatalf("missing --email: %d %s", code, errs)
	}
	if code, _, errs := runCLI(pw+"\n", "create-operator", "--email", "z@example.com", "--role", "root"); code != 2 || !strings.Contains(errs, `--role "root"`) {
		t.Fatalf("unknown role: %d %s", code, errs)
	}
}

func TestServeRefusesWithoutCAOrSecrets(t *testing.T) {
	t.Setenv("PG_DSN", pgtest.DSN(t))
	t.Setenv("CA_DIR", filepath.Join(t.TempDir(), "missing"))
	if code, _, errs := runCLI("", "serve"); code != 1 || !strings.Contains(errs, "init-ca") {
		t.Fatalf("serve without a CA: %d %s", code, errs)
	}
	t.Setenv("NATS_PROVISIONER_ENABLED", "true")
	t.Setenv("NATS_PROVISIONER_SHARED_SECRET", "")
	if code, _, errs := runCLI("", "serve"); code != 1 || !strings.Contains(errs, "NATS_PROVISIONER_SHARED_SECRET") {
		t.Fatalf("serve without the shared secret: %d %s", code, errs)
	}
	os.Unsetenv("PG_DSN")
	if code, _, errs := runCLI("", "serve"); code != 1 || !strings.Contains(errs, "PG_DSN") {
		t.Fatalf("serve without PG_DSN: %d %s", code, errs)
	}
	if code, out, _ := runCLI("", "version"); code != 0 || !strings.HasPrefix(out, "controlplane ") {
		t.Fatalf("version: %d %q", code, out)
	}
}
