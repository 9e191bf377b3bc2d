package app_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/internal/appenv/appenvtest"
)

// Every subcommand answers -h, -help and --help with its usage and every
// environment variable it reads (taken from the configuration structs the
// code loads), on standard output, with exit status 0 and without doing
// anything else; a subcommand without flags refuses arguments.
func TestEverySubcommandHasHelp(t *testing.T) {
	cases := []appenvtest.HelpCase{
		{Args: []string{"serve"}, Want: appenvtest.Keys(t, &app.ServeConfig{})},
		{Args: []string{"migrate"}, Want: []string{"PG_DSN"}},
		{Args: []string{"init-ca"}, Want: []string{"CA_DIR", "-dns", "-ip", "-replace-server-cert", "-force"}},
		{Args: []string{"init-ca", "--dns", "x"}, Want: []string{"CA_DIR"}},
		{Args: []string{"create-operator"}, Want: []string{"PG_DSN", "-email", "standard input"}},
		{Args: []string{"healthcheck"}, Want: []string{"LISTEN_ADDR"}},
		{Args: []string{"version"}, Want: []string{"usage: controlplane version"}},
	}
	// Help must not touch anything: a CA_DIR that init-ca would create stays absent.
	caDir := filepath.Join(t.TempDir(), "ca")
	t.Setenv("CA_DIR", caDir)
	appenvtest.CheckHelp(t, "controlplane", func(args ...string) (int, string, string) { return runCLI("", args...) }, cases)
	if _, err := os.Stat(caDir); !os.IsNotExist(err) {
		t.Fatalf("init-ca -h created %s", caDir)
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		if code, out, _ := runCLI("", args...); code != 0 || !strings.Contains(out, "create-operator") || !strings.Contains(out, "-h") {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	for _, args := range [][]string{{"serve", "extra"}, {"migrate", "now"}, {"healthcheck", "x"}, {"init-ca", "--dns", "x", "stray"}, {"init-ca", "--nope"}, {"nope"}} {
		if code, _, errs := runCLI("", args...); code != 2 || errs == "" {
			t.Fatalf("%v: exit %d (%q), want 2 with a message", args, code, errs)
		}
	}
}

// init-ca keeps a server certificate for the same names, refuses other
// names without --replace-server-cert (changing nothing), and replaces it
// when asked.
func TestInitCARefusesToReplaceTheServerCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	t.Setenv("CA_DIR", dir)
	if code, out, errs := runCLI("", "init-ca", "--dns", "cp.example", "--ip", "127.0.0.1"); code != 0 || !strings.Contains(out, "issued") {
		t.Fatalf("init-ca: %d %s %s", code, out, errs)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cert, key := read("server.crt"), read("server.key")
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		replaced bool
	}{
		{"same names, other order", []string{"--ip", "127.0.0.1", "--dns", "cp.example"}, 0, "kept", false},
		{"other names", []string{"--dns", "cp2.example"}, 1, "--replace-server-cert", false},
		{"fewer names", []string{"--dns", "cp.example"}, 1, "--replace-server-cert", false},
		{"other names, replace", []string{"--dns", "cp2.example", "--replace-server-cert"}, 0, "issued", true},
		{"same names, force", []string{"--dns", "cp2.example", "--force"}, 0, "issued", true},
	}
	for _, tc := range cases {
		code, out, errs := runCLI("", append([]string{"init-ca"}, tc.args...)...)
		if code != tc.wantCode || !strings.Contains(out+errs, tc.wantOut) {
			t.Fatalf("%s: exit %d, %q %q; want %d and %q", tc.name, code, out, errs, tc.wantCode, tc.wantOut)
		}
		nowCert, nowKey := read("server.crt"), read("server.key")
		if changed := !bytes.Equal(nowCert, cert) || !bytes.Equal(nowKey, key); changed != tc.replaced {
			t.Fatalf("%s: server certificate replaced = %v, want %v", tc.name, changed, tc.replaced)
		}
		cert, key = nowCert, nowKey
	}
}
