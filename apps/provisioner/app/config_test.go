package app_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/apps/provisioner/app"
)

// specTable is the configuration table of the provisioner's specification,
// copied verbatim. The binary must read every name in it, with its default,
// and require the required ones: TestConfigurationIsTheSpecifications keeps
// it so, and docs/provisioner.md's table must agree.
const specTable = "" +
	"| Variable | Required | Default | Purpose |\n" +
	"|---|---|---|---|\n" +
	"| `PG_DSN` | yes, for `serve` | none | PostgreSQL DSN for the credential store |\n" +
	"| `OPERATOR_SEED_PATH` | yes, for `serve` | none | Path of the operator seed file (mode 0600, no group or other read) |\n" +
	"| `ACCOUNT_SEED_ENCRYPTION_KEY` | yes, for `serve` | none | Base64 32-byte AES-GCM key for account seeds |\n" +
	"| `BACKEND_SHARED_SECRET` | yes, for `serve` | none | Shared secret required on write routes |\n" +
	"| `LISTEN_ADDR` | no | `:8080` | HTTP listen address |\n" +
	"| `NATS_URL` | no | `nats://127.0.0.1:4222` | NATS server URL for control-admin operations |\n" +
	"| `CONTROL_CREDS_PATH` | no | unset | Pre-existing control-admin creds. When unset, the service mints a temporary control-admin credential. |\n" +
	"| `COMMAND_STREAM_NAME` | no | `RXC_CMD` | JetStream command stream name |\n" +
	"| `CONTROL_ACCOUNT_NAME` | no | `CONTROL` | Account used for control-admin and JetStream operations |\n" +
	"| `STARTUP_ENSURE_COMMAND_STREAM` | no | `false` | When `true`, ensure the command stream exists on startup |\n"

type specVar struct {
	name, def string
	required  bool
}

func specVars(t *testing.T) []specVar {
	t.Helper()
	var out []specVar
	for line := range strings.Lines(specTable) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("specification row %q: want 4 cells", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if name == "Variable" || strings.HasPrefix(name, "---") {
			continue
		}
		def := strings.Trim(strings.TrimSpace(cells[2]), "`")
		if def == "none" || def == "unset" {
			def = ""
		}
		out = append(out, specVar{name: name, def: def, required: strings.HasPrefix(strings.TrimSpace(cells[1]), "yes")})
	}
	if len(out) != 10 {
		t.Fatalf("specification table has %d variables, want 10", len(out))
	}
	return out
}

// fieldsByEnv maps each envconfig name of ServeConfig to its field.
func fieldsByEnv(v reflect.Value, out map[string]reflect.Value) map[string]reflect.Value {
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Anonymous {
			fieldsByEnv(v.Field(i), out)
			continue
		}
		if name := f.Tag.Get("envconfig"); name != "" {
			out[name] = v.Field(i)
		}
	}
	return out
}

// setServeEnv unsets every variable serve reads, then sets env (all
// restored after the test).
func setServeEnv(t *testing.T, env map[string]string) {
	for name := range fieldsByEnv(reflect.ValueOf(app.ServeConfig{}), map[string]reflect.Value{}) {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func validRequired(t *testing.T) map[string]string {
	k := make([]byte, 32)
	rand.Read(k)
	return map[string]string{
		"PG_DSN":                      "postgres://rxc@127.0.0.1:1/provisioner",
		"OPERATOR_SEED_PATH":          "/var/lib/rxc/operator.nk",
		"ACCOUNT_SEED_ENCRYPTION_KEY": base64.StdEncoding.EncodeToString(k),
		"BACKEND_SHARED_SECRET":       "spec-test-secret-0123456789",
	}
}

func TestConfigurationIsTheSpecifications(t *testing.T) {
	vars := specVars(t)
	required := validRequired(t)
	load := func(t *testing.T, set map[string]string) (map[string]reflect.Value, error) {
		t.Helper()
		setServeEnv(t, set)
		cfg, err := app.LoadServeConfig()
		return fieldsByEnv(reflect.ValueOf(cfg), map[string]reflect.Value{}), err
	}
	for _, v := range vars {
		if _, ok := required[v.name]; ok != v.required {
			t.Fatalf("%s: required in the specification %v, in this test %v", v.name, v.required, ok)
		}
	}

	t.Run("defaults", func(t *testing.T) {
		fields, err := load(t, required)
		if err != nil {
			t.Fatalf("serve's configuration with the specification's required variables alone: %v", err)
		}
		for _, v := range vars {
			f, ok := fields[v.name]
			if !ok {
				t.Errorf("%s: serve does not read it", v.name)
				continue
			}
			if got := fmt.Sprint(f.Interface()); !v.required && got != v.def {
				t.Errorf("%s: default %q, the specification says %q", v.name, got, v.def)
			}
		}
	})
	t.Run("each name is read", func(t *testing.T) {
		for _, v := range vars {
			fields, _ := load(t, required)
			val := "spec-value-" + strings.ToLower(v.name)
			switch fields[v.name].Kind() {
			case reflect.Bool:
				val = fmt.Sprint(v.def != "true")
			case reflect.Int, reflect.Int64:
				val = "7"
			}
			if v.name == "ACCOUNT_SEED_ENCRYPTION_KEY" || v.name == "BACKEND_SHARED_SECRET" {
				val = required[v.name] + "0"
			}
			set := map[string]string{v.name: val}
			for k, r := range required {
				if k != v.name {
					set[k] = r
				}
			}
			fields, err := load(t, set)
			if err != nil {
				t.Fatalf("%s=%s: %v", v.name, val, err)
			}
			if got := fmt.Sprint(fields[v.name].Interface()); got != val {
				t.Errorf("%s=%s: serve read %q", v.name, val, got)
			}
		}
	})
	t.Run("required ones are required", func(t *testing.T) {
		for _, v := range vars {
			if !v.required {
				continue
			}
			set := map[string]string{}
			for k, r := range required {
				if k != v.name {
					set[k] = r
				}
			}
			if _, err := load(t, set); err == nil || !strings.Contains(err.Error(), v.name) {
				t.Errorf("without %s: error %v, want one naming it", v.name, err)
			}
		}
	})
	t.Run("docs/provisioner.md agrees", func(t *testing.T) {
		readme, err := os.ReadFile("../../../docs/provisioner.md")
		if err != nil {
			t.Fatal(err)
		}
		section := string(readme)
		i := strings.Index(section, "## Configuration (`provisioner serve`")
		if i < 0 {
			t.Fatal("docs/provisioner.md has no provisioner configuration section")
		}
		section = section[i:]
		section = section[:strings.Index(section, "\n## ")+1]
		for _, v := range vars {
			var row string
			for line := range strings.Lines(section) {
				if strings.HasPrefix(line, "| `"+v.name+"`") {
					row = line
				}
			}
			cells := strings.Split(row, "|")
			switch {
			case row == "" || len(cells) < 4:
				t.Errorf("docs/provisioner.md: no row for %s", v.name)
			case v.required && !strings.Contains(cells[2], "required"):
				t.Errorf("docs/provisioner.md: %s is not marked required: %s", v.name, row)
			case !v.required && v.def != "" && !strings.Contains(cells[2], "`"+v.def+"`"):
				t.Errorf("docs/provisioner.md: %s default is not `%s`: %s", v.name, v.def, row)
			case !v.required && v.def == "" && strings.TrimSpace(cells[2]) != "—":
				t.Errorf("docs/provisioner.md: %s has a default, the specification none: %s", v.name, row)
			}
		}
	})
}

func TestSharedSecretAlias(t *testing.T) {
	required := validRequired(t)
	const secret = "alias-test-secret-0123456789"
	tests := []struct {
		name         string
		backend, old string
		want         string // error substring; "" means loads with secret
	}{
		{"document's name", secret, "", ""},
		{"alias alone", "", secret, ""},
		{"both, equal", secret, secret, ""},
		{"both, different", secret, secret + "x", "both set, to different values"},
		{"neither", "", "", "BACKEND_SHARED_SECRET"},
		{"too short", "short-secret", "", "at least 16 characters"},
		{"alias too short", "", "short-secret", "at least 16 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setServeEnv(t, required)
			os.Unsetenv("BACKEND_SHARED_SECRET")
			if tt.backend != "" {
				t.Setenv("BACKEND_SHARED_SECRET", tt.backend)
			}
			if tt.old != "" {
				t.Setenv("SHARED_SECRET", tt.old)
			}
			cfg, err := app.LoadServeConfig()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LoadServeConfig: %v", err)
			case tt.want == "" && cfg.SharedSecret != secret:
				t.Fatalf("shared secret %q, want %q", cfg.SharedSecret, secret)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			case err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "short-secret")):
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestWorkQueueWarnConsumersSetting(t *testing.T) {
	tests := []struct {
		name, value string
		want        int
		err         string
	}{
		{"default", "", 1000, ""},
		{"off", "0", 0, ""},
		{"larger fleet", "5000", 5000, ""},
		{"negative", "-1", 0, "COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS"},
		{"not a number", "many", 0, "COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setServeEnv(t, validRequired(t))
			if tt.value != "" {
				t.Setenv("COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS", tt.value)
			}
			cfg, err := app.LoadServeConfig()
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("LoadServeConfig: %v", err)
			case tt.err == "" && cfg.CommandStreamWorkQueueWarnConsumers != tt.want:
				t.Fatalf("threshold %d, want %d", cfg.CommandStreamWorkQueueWarnConsumers, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one naming %s", err, tt.err)
			}
		})
	}
}
