// Package deploy holds no code, only the checks that keep the deployment
// files in this folder (Dockerfiles, compose file, nats-server
// configuration, Kubernetes manifests) true to the code: every environment
// variable they set exists in the apps' configuration and the required ones
// are set, ports are the apps' defaults, the nats-server configuration is
// accepted by nats-server's own parser, and the containers run as non-root
// with probes, resource limits and no capabilities. Each rule is a function
// returning problems, and each is shown to fail on a broken copy.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"go.yaml.in/yaml/v3"

	capp "github.com/rxc-project/rxc/apps/controlplane/app"
	papp "github.com/rxc-project/rxc/apps/provisioner/app"
)

// repoRoot is where the tests find the code the files must agree with.
const repoRoot = ".."

// Ports the apps listen on by default; the deployment files must use them.
const (
	provisionerPort = 8080
	apiPort         = 5009
	grpcPort        = 5010
	consolePort     = 8000
	natsClientPort  = 4222
	natsRoutePort   = 6222
	natsMonitorPort = 8222
)

// envVar is one variable an app reads.
type envVar struct {
	Default  string
	Required bool
}

// envOf lists the variables envconfig reads into spec, with envconfig's own
// naming rules (prefixes of nested groups, flattened embedded structs).
func envOf(t testing.TB, spec any) map[string]envVar {
	t.Helper()
	var b bytes.Buffer
	const format = "{{range .}}{{usage_key .}}\x1f{{usage_default .}}\x1f{{usage_required .}}\n{{end}}"
	if err := envconfig.Usagef("", spec, &b, format); err != nil {
		t.Fatalf("envconfig: %v", err)
	}
	out := map[string]envVar{}
	for line := range strings.Lines(b.String()) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\x1f")
		out[f[0]] = envVar{Default: f[1], Required: f[2] == "true"}
	}
	return out
}

// commands lists every image and subcommand the deployment files run.
type commands map[string]map[string]map[string]envVar

func (c commands) lookup(image, sub string) (map[string]envVar, error) {
	subs, ok := c[image]
	if !ok {
		return nil, fmt.Errorf("image %q is none of ours", image)
	}
	env, ok := subs[sub]
	if !ok {
		return nil, fmt.Errorf("image %s has no subcommand %q", image, sub)
	}
	return env, nil
}

// loadCommands reads the apps' configuration structs and the console's
// start hook. init-ca reads only CA_DIR (apps/controlplane/app/admin.go).
func loadCommands(t testing.TB) commands {
	t.Helper()
	return commands{
		"rxc-provisioner": {
			"serve":         provisionerServeEnv(t),
			"init-operator": envOf(t, &papp.StoreConfig{}),
		},
		"rxc-controlplane": {
			"serve":   envOf(t, &capp.ServeConfig{}),
			"init-ca": {"CA_DIR": {Default: "ca"}},
		},
		"rxc-console": {"": consoleEnv(t)},
	}
}

// provisionerServeEnv is what `provisioner serve` reads. LoadServeConfig
// requires BACKEND_SHARED_SECRET or its alias SHARED_SECRET; the deployment
// files must use the first, so it counts as required here.
func provisionerServeEnv(t testing.TB) map[string]envVar {
	env := envOf(t, &papp.ServeConfig{})
	v := env["BACKEND_SHARED_SECRET"]
	v.Required = true
	env["BACKEND_SHARED_SECRET"] = v
	return env
}

// testedNATSImages are the nats-server images of the releases the tests run
// against: the one go.mod pins and the Makefile's NATS_COMPAT_VERSION. The
// deployment files must run one of them.
var testedNATSImages = sync.OnceValues(func() ([]string, error) {
	var out []string
	for _, src := range []struct{ file, pattern string }{
		{"go.mod", `(?m)^\s*github\.com/nats-io/nats-server/v2 v(\d+\.\d+\.\d+)\s*$`},
		{"Makefile", `(?m)^NATS_COMPAT_VERSION \?= v(\d+\.\d+\.\d+)\s*$`},
	} {
		data, err := os.ReadFile(filepath.Join(repoRoot, src.file))
		if err != nil {
			return nil, err
		}
		m := regexp.MustCompile(src.pattern).FindSubmatch(data)
		if m == nil {
			return nil, fmt.Errorf("%s names no nats-server version", src.file)
		}
		out = append(out, "nats:"+string(m[1])+"-alpine")
	}
	return out, nil
})

// checkNATSImage reports an image that is no tested nats-server release.
func checkNATSImage(where, image string) []string {
	tested, err := testedNATSImages()
	if err != nil {
		return []string{err.Error()}
	}
	if !slices.Contains(tested, image) {
		return []string{fmt.Sprintf("%s: image %q is no tested nats-server release (%s)", where, image, strings.Join(tested, ", "))}
	}
	return nil
}

var hookVar = regexp.MustCompile(`\$\{((?:VITE|RXC)_[A-Z0-9_]+)(:?-([^}]*))?\}`)

// consoleEnv lists the variables the console image's start hook reads.
func consoleEnv(t testing.TB) map[string]envVar {
	t.Helper()
	hook := readFile(t, filepath.Join(repoRoot, "web", "docker-entrypoint.d", "40-rxc-config.sh"))
	out := map[string]envVar{}
	for _, m := range hookVar.FindAllStringSubmatch(hook, -1) {
		if v, ok := out[m[1]]; !ok || v.Default == "" {
			out[m[1]] = envVar{Default: m[3]}
		}
	}
	if len(out) == 0 {
		t.Fatal("no VITE_/RXC_ variables found in the console's start hook")
	}
	return out
}

// checkEnv reports variables the command does not read and required ones
// that are not set. set maps names to values ("" when only a Secret holds it).
func checkEnv(where string, env map[string]envVar, set map[string]string) []string {
	return append(unknownVars(where, env, set), missingVars(where, env, set)...)
}

func unknownVars(where string, env map[string]envVar, set map[string]string) []string {
	var problems []string
	for _, name := range sortedKeys(set) {
		if _, ok := env[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s sets %s, which the app does not read", where, name))
		}
	}
	return problems
}

func missingVars(where string, env map[string]envVar, set map[string]string) []string {
	var problems []string
	for _, name := range sortedKeys(env) {
		if _, ok := set[name]; env[name].Required && !ok {
			problems = append(problems, fmt.Sprintf("%s does not set the required %s", where, name))
		}
	}
	return problems
}

// effective is the value a command sees: the one set or the default.
func effective(env map[string]envVar, set map[string]string, name string) string {
	if v, ok := set[name]; ok {
		return v
	}
	return env[name].Default
}

// listenPort is the port of a listen address such as ":8080".
func listenPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// natsURLs parses a comma-separated server list into host:port strings.
func natsURLs(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Port() == "" {
			return nil, fmt.Errorf("%q is not a nats:// or tls://host:port URL", s)
		}
		out = append(out, u.Host)
	}
	return out, nil
}

// The defaults in the code are the ports this folder publishes and probes.
func TestCodeDefaultsAreTheDeployedPorts(t *testing.T) {
	t.Parallel()
	cmds := loadCommands(t)
	tests := []struct {
		image, sub, name string
		want             int
	}{
		{"rxc-provisioner", "serve", "LISTEN_ADDR", provisionerPort},
		{"rxc-controlplane", "serve", "LISTEN_ADDR", apiPort},
		{"rxc-controlplane", "serve", "GRPC_LISTEN_ADDR", grpcPort},
		{"rxc-console", "", "RXC_LISTEN_PORT", consolePort},
	}
	for _, tc := range tests {
		env, err := cmds.lookup(tc.image, tc.sub)
		if err != nil {
			t.Fatal(err)
		}
		v := env[tc.name].Default
		got, err := strconv.Atoi(v)
		if err != nil {
			got, err = listenPort(v)
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %s: default %s = %q, want port %d", tc.image, tc.sub, tc.name, v, tc.want)
		}
	}
	for _, name := range []string{"NATS_URL"} {
		env, _ := cmds.lookup("rxc-provisioner", "serve")
		hosts, err := natsURLs(env[name].Default)
		if err != nil || len(hosts) != 1 || !strings.HasSuffix(hosts[0], ":"+strconv.Itoa(natsClientPort)) {
			t.Errorf("provisioner default %s = %q, want port %d", name, env[name].Default, natsClientPort)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlFiles lists every YAML file under this folder.
func yamlFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// A chart's templates are YAML only once Helm renders them
		// (helm_test.go parses the rendered documents).
		if d.IsDir() && filepath.Base(path) == "templates" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// decodeAll decodes every document of a YAML stream.
func decodeAll(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, &n)
	}
}

func TestEveryYAMLFileParses(t *testing.T) {
	t.Parallel()
	files := yamlFiles(t)
	if len(files) < 2 {
		t.Fatalf("found %d YAML files, want the compose file and the manifests", len(files))
	}
	for _, f := range files {
		docs, err := decodeAll([]byte(readFile(t, f)))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for i, d := range docs {
			var v any
			if err := d.Decode(&v); err != nil || v == nil {
				t.Errorf("%s: document %d is empty or undecodable: %v", f, i+1, err)
			}
		}
	}
	if _, err := decodeAll([]byte("a: [1, 2\nb: c\n")); err == nil {
		t.Error("decodeAll accepted broken YAML")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// wantProblem fails unless one of problems contains want.
func wantProblem(t *testing.T, problems []string, want string) {
	t.Helper()
	for _, p := range problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Errorf("no problem mentions %q; got:\n%s", want, strings.Join(problems, "\n"))
}

// noProblems fails listing problems, if any.
func noProblems(t *testing.T, what string, problems []string) {
	t.Helper()
	if len(problems) > 0 {
		t.Errorf("%s:\n  %s", what, strings.Join(problems, "\n  "))
	}
}
