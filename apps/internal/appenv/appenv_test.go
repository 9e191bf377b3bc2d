package appenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/loopback"
)

type sample struct {
	DSN     string        `envconfig:"T_DSN" required:"true"`
	Key     string        `envconfig:"T_KEY" required:"true"`
	Seed    string        `envconfig:"T_SEED" required:"true" default:"x"`
	Listen  string        `envconfig:"T_LISTEN" default:":80"`
	Secret  string        `envconfig:"T_SECRET" desc:"a secret"`
	Timeout time.Duration `envconfig:"T_TIMEOUT" default:"5s"`
	Group   struct {
		URL string `envconfig:"URL" required:"true"`
	} `envconfig:"T_GROUP"`
}

func TestLoadNamesEveryMissingVariable(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"none set", nil, []string{"T_DSN", "T_KEY", "T_GROUP_URL"}},
		{"one set", map[string]string{"T_KEY": "k"}, []string{"T_DSN", "T_GROUP_URL"}},
		{"set but empty counts as set", map[string]string{"T_DSN": "", "T_KEY": "", "T_GROUP_URL": ""}, nil},
		{"all set", map[string]string{"T_DSN": "d", "T_KEY": "k", "T_GROUP_URL": "u"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"T_DSN", "T_KEY", "T_SEED", "T_GROUP_URL"} {
				t.Setenv(k, "")
				unsetenv(t, k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var cfg sample
			err := Load(&cfg)
			var missing *MissingError
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if cfg.Seed != "x" || cfg.Listen != ":80" || cfg.Timeout != 5*time.Second {
					t.Fatalf("defaults not applied: %+v", cfg)
				}
				return
			}
			if !errors.As(err, &missing) {
				t.Fatalf("Load: %v, want a MissingError", err)
			}
			if fmt.Sprint(missing.Names) != fmt.Sprint(tc.want) {
				t.Fatalf("missing %v, want %v", missing.Names, tc.want)
			}
			for _, n := range tc.want {
				if !strings.Contains(err.Error(), n) {
					t.Fatalf("message %q does not name %s", err, n)
				}
			}
		})
	}
}

func TestHelpListsFlagsAndVariables(t *testing.T) {
	fl := flag.NewFlagSet("x", flag.ContinueOnError)
	fl.String("name", "RXC", "the name")
	var out bytes.Buffer
	if err := Help(&out, "usage: x [flags]\n\nDoes x.", fl, &sample{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"usage: x [flags]", "-name", "the name", "T_DSN", "(required)", "T_LISTEN", ":80", "T_SECRET", "a secret", "T_GROUP_URL", "T_TIMEOUT", "5s"} {
		if !strings.Contains(text, want) {
			t.Errorf("help lacks %q:\n%s", want, text)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "T_SEED") && strings.Contains(line, "(required)") {
			t.Errorf("a variable with a default is shown as required: %q", line)
		}
	}
}

// An unreachable database is reported while Connect waits, never with the
// password, and the final error says how long and how often it tried.
func TestConnectLogsProgress(t *testing.T) {
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	dsn := fmt.Sprintf("postgres://rxc:s3cret-pw@127.0.0.1:%d/rxc?sslmode=disable&connect_timeout=1", port)
	_, err = Connect(context.Background(), dsn, 2*time.Second, CLILogger(&logs))
	if err == nil {
		t.Fatal("Connect to a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "did not answer within 2s") || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("error %q does not say how long and how often", err)
	}
	text := logs.String()
	if !strings.Contains(text, "postgres not reachable yet") || !strings.Contains(text, fmt.Sprintf("127.0.0.1:%d/rxc", port)) {
		t.Fatalf("no progress logged:\n%s", text)
	}
	if strings.Contains(text+err.Error(), "s3cret-pw") {
		t.Fatalf("the password was logged:\n%s\n%v", text, err)
	}
	if _, err := Connect(context.Background(), "postgres://rxc:s3cret-pw@[::1", time.Second, CLILogger(&logs)); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("bad DSN: %v", err)
	}
}

// unsetenv removes k for the test; t.Setenv restores it afterwards.
func unsetenv(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	commands := map[string]Command{
		"serve":   {Text: "usage: x serve"},
		"version": {Text: "usage: x version"},
		"init":    {Text: "usage: x init", Flags: func() *flag.FlagSet { return flag.NewFlagSet("init", flag.ContinueOnError) }},
	}
	tests := []struct {
		name     string
		args     []string
		wantCmd  string
		wantCode int
		wantDone bool
		wantOut  string
		wantErr  string
	}{
		{"no arguments", nil, "", 2, true, "", "USAGE"},
		{"help", []string{"-h"}, "", 0, true, "USAGE", ""},
		{"version alias", []string{"--version"}, "version", 0, false, "", ""},
		{"unknown", []string{"bogus"}, "", 2, true, "", `x: unknown command "bogus"`},
		{"command help", []string{"serve", "-h"}, "", 0, true, "usage: x serve", ""},
		{"stray argument", []string{"serve", "now"}, "", 2, true, "", `x serve: unexpected argument "now"`},
		{"flags pass through", []string{"init", "--name", "a"}, "init", 0, false, "", ""},
		{"plain command", []string{"serve"}, "serve", 0, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			cmd, code, done := Dispatch("x", "USAGE", commands, tc.args, &out, &errOut)
			if cmd != tc.wantCmd || code != tc.wantCode || done != tc.wantDone {
				t.Errorf("Dispatch(%q) = %q, %d, %v; want %q, %d, %v", tc.args, cmd, code, done, tc.wantCmd, tc.wantCode, tc.wantDone)
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stdout %q, stderr %q; want them to contain %q and %q", out.String(), errOut.String(), tc.wantOut, tc.wantErr)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error
		stderr  string // contained in what stderr shows
		out     string
	}{
		{name: "flags only", args: []string{"--out", "x"}, out: "x"},
		{name: "no arguments", args: nil},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: ErrUsage, stderr: "bin init: flag provided but not defined: -nope (-h for help)\n"},
		{name: "stray argument", args: []string{"--out", "x", "extra"}, wantErr: ErrUsage, stderr: "bin init: unexpected argument \"extra\" (-h for help)\n"},
		{name: "bad value", args: []string{"--n", "many"}, wantErr: ErrUsage, stderr: "bin init: invalid value \"many\" for flag -n: parse error (-h for help)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl := flag.NewFlagSet("init", flag.ContinueOnError)
			out := fl.String("out", "", "where")
			fl.Int("n", 0, "how many")
			var stderr bytes.Buffer
			err := ParseFlags(fl, "bin", tt.args, &stderr)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			// One line in one style: never the flag package's dump of every flag.
			if stderr.String() != tt.stderr {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.stderr)
			}
			if err == nil && *out != tt.out {
				t.Errorf("--out = %q, want %q", *out, tt.out)
			}
		})
	}
}

func TestExit(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{name: "success", err: nil, code: 0},
		{name: "usage, already explained", err: fmt.Errorf("init: %w", ErrUsage), code: 2},
		{name: "failure", err: errors.New("disk full"), code: 1, stderr: "bin: disk full\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := Exit("bin", tt.err, &stderr); code != tt.code {
				t.Errorf("code = %d, want %d", code, tt.code)
			}
			if stderr.String() != tt.stderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.stderr)
			}
		})
	}
}

// A variable that does not parse is named by its variable, never by the Go field, and its value
// (which may be a secret) is not repeated.
func TestLoadNamesTheVariableThatDoesNotParse(t *testing.T) {
	type cfg struct {
		TTL     time.Duration `envconfig:"SOME_TTL" default:"1h"`
		Enabled bool          `envconfig:"SOME_ENABLED" default:"false"`
		Count   int           `envconfig:"SOME_COUNT" default:"1"`
	}
	for _, tc := range []struct{ key, value, want string }{
		{"SOME_TTL", "secret-xx", "configuration: SOME_TTL is not a duration such as 90s, 15m or 168h (-h lists every variable)"},
		{"SOME_ENABLED", "secret-yes", "configuration: SOME_ENABLED is not true or false (-h lists every variable)"},
		{"SOME_COUNT", "secret-many", "configuration: SOME_COUNT is not a whole number (-h lists every variable)"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(tc.key, tc.value)
			var c cfg
			err := Load(&c)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Load: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "TTL to") {
				t.Fatalf("Load's error repeats the value or the field: %v", err)
			}
		})
	}
}
