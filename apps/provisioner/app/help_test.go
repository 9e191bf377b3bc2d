package app_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/apps/internal/appenv/appenvtest"
	"github.com/rxc-project/rxc/apps/provisioner/app"
)

// Every subcommand answers -h, -help and --help with its usage and every
// environment variable it reads (from the configuration structs the code
// loads), on standard output, exit status 0, doing nothing else.
func TestEverySubcommandHasHelp(t *testing.T) {
	cases := []appenvtest.HelpCase{
		{Args: []string{"serve"}, Want: append(appenvtest.Keys(t, &app.ServeConfig{}), "BACKEND_SHARED_SECRET", "required (or its alias SHARED_SECRET)")},
		{Args: []string{"init-operator"}, Want: append(appenvtest.Keys(t, &app.StoreConfig{}), "-name", "-resolver-url", "-nats-config")},
		{Args: []string{"init-operator", "--name", "X"}, Want: []string{"OPERATOR_SEED_PATH"}},
		{Args: []string{"migrate"}, Want: []string{"PG_DSN"}},
		{Args: []string{"reseal"}, Want: appenvtest.Keys(t, &app.ResealConfig{})},
		{Args: []string{"healthcheck"}, Want: []string{"LISTEN_ADDR"}},
		{Args: []string{"version"}, Want: []string{"usage: provisioner version"}},
	}
	seed := filepath.Join(t.TempDir(), "keys", "operator.nk")
	t.Setenv("OPERATOR_SEED_PATH", seed)
	appenvtest.CheckHelp(t, "provisioner", runCLI, cases)
	if _, err := os.Stat(filepath.Dir(seed)); !os.IsNotExist(err) {
		t.Fatalf("init-operator -h touched %s", filepath.Dir(seed))
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		if code, out, _ := runCLI(args...); code != 0 || !strings.Contains(out, "init-operator") {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	for _, args := range [][]string{{"serve", "extra"}, {"migrate", "now"}, {"reseal", "now"}, {"healthcheck", "x"}, {"init-operator", "stray"}, {"init-operator", "--nope"}, {"nope"}} {
		if code, _, errs := runCLI(args...); code != 2 || errs == "" {
			t.Fatalf("%v: exit %d (%q), want 2 with a message", args, code, errs)
		}
	}
}

// Every missing required variable is named in one message.
func TestMissingVariablesAreNamedAtOnce(t *testing.T) {
	all := []string{"PG_DSN", "OPERATOR_SEED_PATH", "ACCOUNT_SEED_ENCRYPTION_KEY", "BACKEND_SHARED_SECRET", "SHARED_SECRET"}
	cases := []struct {
		args []string
		set  map[string]string
		want []string
	}{
		{[]string{"serve"}, nil, []string{"PG_DSN", "OPERATOR_SEED_PATH", "ACCOUNT_SEED_ENCRYPTION_KEY", "BACKEND_SHARED_SECRET"}},
		{[]string{"serve"}, map[string]string{"SHARED_SECRET": "0123456789abcdef"}, []string{"PG_DSN", "OPERATOR_SEED_PATH", "ACCOUNT_SEED_ENCRYPTION_KEY"}},
		{[]string{"serve"}, map[string]string{"PG_DSN": "postgres://x@127.0.0.1:1/x"}, []string{"OPERATOR_SEED_PATH", "ACCOUNT_SEED_ENCRYPTION_KEY", "BACKEND_SHARED_SECRET"}},
		{[]string{"init-operator"}, nil, []string{"PG_DSN", "OPERATOR_SEED_PATH", "ACCOUNT_SEED_ENCRYPTION_KEY"}},
		{[]string{"migrate"}, nil, []string{"PG_DSN"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for _, k := range all {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			for k, v := range tc.set {
				t.Setenv(k, v)
			}
			code, _, errs := runCLI(tc.args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s", code, errs)
			}
			for _, k := range all {
				named := regexp.MustCompile(`\b` + k + `\b`).MatchString(errs)
				want := false
				for _, w := range tc.want {
					want = want || w == k
				}
				if named != want {
					t.Errorf("%s named = %v, want %v: %s", k, named, want, errs)
				}
			}
		})
	}
}
