// Package appenvtest checks the services' command-line help in their
// tests: every subcommand answers -h, -help and --help with its usage and
// what it reads. Only tests import it.
package appenvtest

import (
	"strings"
	"testing"

	"github.com/rxc-project/rxc/apps/internal/appenv"
)

// HelpCase is a subcommand's arguments and what its help must mention.
type HelpCase struct {
	Args []string
	Want []string
}

// Keys lists the environment variables a configuration struct reads.
func Keys(t testing.TB, spec any) []string {
	t.Helper()
	vars, err := appenv.Variables(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vars {
		out = append(out, v.Key)
	}
	return out
}

// CheckHelp runs every case with -h, -help and --help through run and fails
// t unless each exits 0, writes nothing on standard error, and prints
// "usage: <prog> <subcommand>" first and every Want somewhere.
func CheckHelp(t *testing.T, prog string, run func(args ...string) (code int, stdout, stderr string), cases []HelpCase) {
	t.Helper()
	for _, tc := range cases {
		for _, h := range []string{"-h", "-help", "--help"} {
			args := append(append([]string{}, tc.Args...), h)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errs := run(args...)
				if code != 0 || errs != "" {
					t.Fatalf("exit %d, stderr %q", code, errs)
				}
				if !strings.HasPrefix(out, "usage: "+prog+" "+tc.Args[0]) {
					t.Fatalf("help does not start with the usage:\n%s", out)
				}
				for _, w := range tc.Want {
					if !strings.Contains(out, w) {
						t.Errorf("help lacks %q:\n%s", w, out)
					}
				}
			})
		}
	}
}
