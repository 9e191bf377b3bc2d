package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/pgtest"
)

type cliEnv struct {
	dir, seed, dsn, key string
}

func newCLIEnv(t *testing.T) cliEnv {
	k := make([]byte, 32)
	rand.Read(k)
	dir := t.TempDir()
	e := cliEnv{dir: dir, seed: filepath.Join(dir, "secrets", "operator.nk"), dsn: pgtest.DSN(t), key: base64.StdEncoding.EncodeToString(k)}
	e.set(t)
	return e
}

func (e cliEnv) set(t *testing.T) {
	t.Setenv("PG_DSN", e.dsn)
	t.Setenv("OPERATOR_SEED_PATH", e.seed)
	t.Setenv("ACCOUNT_SEED_ENCRYPTION_KEY", e.key)
	t.Setenv("BACKEND_SHARED_SECRET", "cli-test-secret-0123456789")
	t.Setenv("LISTEN_ADDR", "127.0.0.1:0")
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := app.Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInitOperator(t *testing.T) {
	e := newCLIEnv(t)
	frag := filepath.Join(e.dir, "nats-operator.conf")

	// Usage mistakes exit 2 in one style before anything is written.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"init-operator", "--resolver-url", "ftp://x/"}, "provisioner init-operator: --resolver-url: "},
		{[]string{"init-operator", "--identity-seed", e.seed}, "provisioner init-operator: --identity-seed must differ from OPERATOR_SEED_PATH"},
		{[]string{"init-operator", "--nope"}, "provisioner init-operator: flag provided but not defined: -nope (-h for help)"},
	} {
		code, _, errs := runCLI(append(tc.args, "--nats-config", frag)...)
		if code != 2 || !strings.HasPrefix(errs, tc.want) || !strings.HasSuffix(errs, "(-h for help)\n") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q…(-h for help)", tc.args, code, errs, tc.want)
		}
		for _, p := range []string{e.seed, frag} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("%v wrote %s before refusing", tc.args, p)
			}
		}
	}

	code, out, errs := runCLI("init-operator", "--name", "ACME-OP", "--nats-config", frag)
	if code != 0 {
		t.Fatalf("first init-operator: exit %d: %s", code, errs)
	}
	for _, want := range []string{"operator created", "operator:", "system account:", "control account:", "next steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	st, err := os.Stat(e.seed)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("seed file mode %04o, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(e.seed)); dst.Mode().Perm() != 0o700 {
		t.Errorf("seed folder mode %04o, want 0700", dst.Mode().Perm())
	}
	seed1, _ := os.ReadFile(e.seed)
	if !strings.HasPrefix(string(seed1), "SO") {
		t.Fatalf("seed file does not hold an operator seed")
	}
	if strings.Contains(out+errs, strings.TrimSpace(string(seed1))) {
		t.Fatal("the operator seed was printed")
	}
	fragment, _ := os.ReadFile(frag)
	lines := nonEmptyLines(string(fragment))
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "operator: ") || !strings.HasPrefix(lines[1], "system_account: ") ||
		lines[2] != `resolver: URL("http://127.0.0.1:8080/jwt/v1/accounts/")` {
		t.Fatalf("fragment must hold operator, system_account and resolver only:\n%s", fragment)
	}

	// A second run where seed and store agree rewrites the fragment only.
	os.Remove(frag)
	code, out, errs = runCLI("init-operator", "--nats-config", frag, "--resolver-url", "http://provisioner:8080/jwt/v1/accounts/")
	if code != 0 || !strings.Contains(out, "already initialised") {
		t.Fatalf("second init-operator: exit %d: %s %s", code, out, errs)
	}
	if seed2, _ := os.ReadFile(e.seed); !bytes.Equal(seed1, seed2) {
		t.Fatal("second run replaced the seed file")
	}
	if f, _ := os.ReadFile(frag); !strings.Contains(string(f), `URL("http://provisioner:8080/jwt/v1/accounts/")`) {
		t.Fatalf("fragment not rewritten with the new resolver URL:\n%s", f)
	}

	t.Run("seed file of another operator", func(t *testing.T) {
		other := newCLIEnv(t)
		if code, _, errs := runCLI("init-operator"); code != 0 {
			t.Fatal(errs)
		}
		// Point the first store at the second seed file.
		t.Setenv("PG_DSN", e.dsn)
		code, _, errs := runCLI("init-operator")
		if code != 1 || !strings.Contains(errs, "does not match") && !strings.Contains(errs, "but the store's operator is") {
			t.Fatalf("exit %d, stderr %q; want 1 and a mismatch message", code, errs)
		}
		_ = other
	})
	t.Run("store without seed file", func(t *testing.T) {
		e.set(t)
		t.Setenv("OPERATOR_SEED_PATH", filepath.Join(t.TempDir(), "missing.nk"))
		code, _, errs := runCLI("init-operator")
		if code != 1 || !strings.Contains(errs, "seed file") || !strings.Contains(errs, "missing") {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
	})
	t.Run("seed file without store", func(t *testing.T) {
		e.set(t)
		t.Setenv("PG_DSN", pgtest.DSN(t))
		code, _, errs := runCLI("init-operator")
		if code != 1 || !strings.Contains(errs, "store has no operator") {
			t.Fatalf("exit %d, stderr %q", code, errs)
		}
		if seed2, _ := os.ReadFile(e.seed); !bytes.Equal(seed1, seed2) {
			t.Fatal("the seed file was touched")
		}
	})
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestServeRefusesToStart(t *testing.T) {
	e := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T)
		want  string
	}{
		{"group-readable seed", func(t *testing.T) {
			os.Chmod(e.seed, 0o640)
			t.Cleanup(func() { os.Chmod(e.seed, 0o600) })
		}, "must not be accessible to group or others"},
		{"other-readable seed", func(t *testing.T) {
			os.Chmod(e.seed, 0o604)
			t.Cleanup(func() { os.Chmod(e.seed, 0o600) })
		}, "must not be accessible to group or others"},
		{"short key", func(t *testing.T) {
			t.Setenv("ACCOUNT_SEED_ENCRYPTION_KEY", base64.StdEncoding.EncodeToString(make([]byte, 16)))
		}, "ACCOUNT_SEED_ENCRYPTION_KEY"},
		{"garbage key", func(t *testing.T) { t.Setenv("ACCOUNT_SEED_ENCRYPTION_KEY", "not a key!") }, "ACCOUNT_SEED_ENCRYPTION_KEY"},
		{"missing PG_DSN", func(t *testing.T) { os.Unsetenv("PG_DSN"); t.Cleanup(func() { os.Setenv("PG_DSN", e.dsn) }) }, "PG_DSN"},
		{"missing shared secret", func(t *testing.T) {
			os.Unsetenv("BACKEND_SHARED_SECRET")
			t.Cleanup(func() { os.Setenv("BACKEND_SHARED_SECRET", "cli-test-secret-0123456789") })
		}, "BACKEND_SHARED_SECRET"},
		{"missing seed path", func(t *testing.T) {
			os.Unsetenv("OPERATOR_SEED_PATH")
			t.Cleanup(func() { os.Setenv("OPERATOR_SEED_PATH", e.seed) })
		}, "OPERATOR_SEED_PATH"},
		{"empty store", func(t *testing.T) { t.Setenv("PG_DSN", pgtest.DSN(t)) }, "no operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.set(t)
			tt.setup(t)
			code, _, errs := runCLI("serve")
			if code != 1 || !strings.Contains(errs, tt.want) {
				t.Fatalf("serve: exit %d, stderr %q; want exit 1 naming %q", code, errs, tt.want)
			}
		})
	}
}

func TestMigrateAndVersion(t *testing.T) {
	newCLIEnv(t)
	if code, out, errs := runCLI("migrate"); code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("migrate: %d %s %s", code, out, errs)
	}
	if code, out, _ := runCLI("migrate"); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: %d %s", code, out)
	}
	if code, out, _ := runCLI("version"); code != 0 || !strings.HasPrefix(out, "provisioner ") {
		t.Fatalf("version: %d %q", code, out)
	}
	if code, _, _ := runCLI("bogus"); code != 2 {
		t.Fatalf("unknown command exit %d, want 2", code)
	}
}

// TestServeStartsWithTheSpecificationsVariables runs `serve` with nothing
// but the specification's variables set, as a new user following it would.
func TestServeStartsWithTheSpecificationsVariables(t *testing.T) {
	e := newCLIEnv(t)
	if code, _, errs := runCLI("init-operator"); code != 0 {
		t.Fatal(errs)
	}
	s := startServe(t, map[string]string{
		"PG_DSN": e.dsn, "OPERATOR_SEED_PATH": e.seed, "ACCOUNT_SEED_ENCRYPTION_KEY": e.key,
		"BACKEND_SHARED_SECRET": "spec-only-secret-0123456789", "NATS_URL": "nats://127.0.0.1:1",
	})
	s.waitAnswer(t, "/healthz", http.StatusNoContent, 30*time.Second)
	s.stopped(t)
}

// cliServe is `provisioner serve` run in-process on a free loopback port.
type cliServe struct {
	base string // http://127.0.0.1:port
	logs *logbuf.Buffer
	done chan int
	stop context.CancelFunc
}

// startServe runs serve with nothing but env and LISTEN_ADDR set (every
// other serve variable cleared) until stop or the test's end.
func startServe(t *testing.T, env map[string]string) *cliServe {
	t.Helper()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	setServeEnv(t, env)
	t.Setenv("LISTEN_ADDR", addr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &cliServe{base: "http://" + addr, logs: &logbuf.Buffer{}, done: make(chan int, 1), stop: cancel}
	go func() { s.done <- app.Run(ctx, []string{"serve"}, s.logs, s.logs) }()
	return s
}

// waitAnswer polls path until it answers want (0: any status) and returns
// the body; serve exiting first, or limit passing, fails the test.
func (s *cliServe) waitAnswer(t *testing.T, path string, want int, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Get(s.base + path)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want == 0 || resp.StatusCode == want {
				return string(body)
			}
		}
		select {
		case code := <-s.done:
			t.Fatalf("serve exited with %d: %s", code, s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer %s within %s: %s", path, limit, s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopped ends serve and fails unless it exits with 0 within 30s.
func (s *cliServe) stopped(t *testing.T) {
	t.Helper()
	s.stop()
	select {
	case code := <-s.done:
		if code != 0 {
			t.Fatalf("serve exited with %d: %s", code, s.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
}
