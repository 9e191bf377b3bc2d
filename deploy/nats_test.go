package deploy

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
)

// operatorFragment is what init-operator writes for resolverURL, from fresh keys.
func operatorFragment(t testing.TB, resolverURL string) []byte {
	t.Helper()
	_, opSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	sys, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	sysPub, err := sys.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	opJWT, err := jwtauthority.SignOperator(opSeed, "RXC", sysPub, "")
	if err != nil {
		t.Fatal(err)
	}
	return jwtauthority.RenderServerConfig(opJWT, sysPub, resolverURL)
}

var includeLine = regexp.MustCompile(`(?m)^\s*include\s+"([^"]+)"`)

// processNATSConfig lets nats-server's parser read conf, with the operator
// fragment placed where conf includes it.
func processNATSConfig(t testing.TB, conf string, fragment []byte) (*server.Options, error) {
	t.Helper()
	dir := t.TempDir()
	for _, m := range includeLine.FindAllStringSubmatch(conf, -1) {
		p := filepath.Join(dir, m[1])
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fragment, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return server.ProcessConfigFile(path)
}

// checkNATSOptions holds every node to the cluster this folder deploys:
// operator mode with the URL resolver, JetStream with a store, routes to the
// other nodes, and the standard ports.
func checkNATSOptions(where string, o *server.Options, serverName string, routes []string) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, args...)) }
	if o.ServerName != serverName {
		add("server_name %q, want %q", o.ServerName, serverName)
	}
	if o.Port != natsClientPort {
		add("client port %d, want %d", o.Port, natsClientPort)
	}
	if o.HTTPPort != natsMonitorPort {
		add("monitoring port %d, want %d (health checks use it)", o.HTTPPort, natsMonitorPort)
	}
	if !o.JetStream || o.StoreDir == "" {
		add("JetStream is not enabled with a store_dir (enabled %v, store %q)", o.JetStream, o.StoreDir)
	}
	if o.Cluster.Name == "" || o.Cluster.Port != natsRoutePort {
		add("cluster name %q port %d, want a named cluster on %d", o.Cluster.Name, o.Cluster.Port, natsRoutePort)
	}
	var got []string
	for _, r := range o.Routes {
		got = append(got, r.Host)
	}
	slices.Sort(got)
	if !slices.Equal(got, routes) {
		add("routes %v, want %v", got, routes)
	}
	if len(o.TrustedOperators) != 1 || o.SystemAccount == "" {
		add("not in operator mode: %d trusted operators, system account %q (is the fragment included?)", len(o.TrustedOperators), o.SystemAccount)
	}
	if _, ok := o.AccountResolver.(*server.URLAccResolver); !ok {
		add("account resolver %T, want the URL resolver", o.AccountResolver)
	}
	return problems
}

// composeNodes returns each nats service with the config it mounts, its
// certificate paths pointing at certificates of tls/make-certs.sh.
func composeNodes(t testing.TB, c *compose) map[string]string {
	t.Helper()
	certs := composeCerts(t)
	out := map[string]string{}
	for _, name := range sortedKeys(c.Services) {
		if !natsNode.MatchString(name) {
			continue
		}
		for _, m := range mounts(c.Services[name]) {
			if strings.HasSuffix(m.source, ".conf") {
				out[name] = strings.ReplaceAll(readFile(t, m.source), natsTLSDir, certs+"/")
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no nats-server config mounted in compose.yaml")
	}
	return out
}

func TestComposeNATSConfigsFormTheCluster(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	resolver := flag(c.Services["provisioner-init"].Command, "--resolver-url")
	frag := operatorFragment(t, resolver)
	nodes := composeNodes(t, c)
	files, err := filepath.Glob("nats/*.conf")
	if err != nil || len(files) != len(nodes) {
		t.Errorf("deploy/nats holds %v, want one config per compose node (%d)", files, len(nodes))
	}
	for name, conf := range nodes {
		o, err := processNATSConfig(t, conf, frag)
		if err != nil {
			t.Errorf("%s: nats-server rejects its config: %v", name, err)
			continue
		}
		var routes []string
		for other := range nodes {
			if other != name {
				routes = append(routes, fmt.Sprintf("%s:%d", other, natsRoutePort))
			}
		}
		slices.Sort(routes)
		problems := checkNATSOptions(name, o, name, routes)
		if o.TLSConfig == nil || len(o.TLSConfig.Certificates) == 0 || o.TLSConfig.MinVersion < tls.VersionTLS13 {
			problems = append(problems, name+": client connections without TLS 1.3")
		}
		if o.Cluster.TLSConfig == nil || o.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
			problems = append(problems, name+": cluster routes without verified TLS")
		}
		noProblems(t, name, problems)
	}
}

func TestNATSChecksFail(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	resolver := flag(c.Services["provisioner-init"].Command, "--resolver-url")
	frag := operatorFragment(t, resolver)
	conf := composeNodes(t, c)["nats-1"]
	routes := []string{"nats-2:6222", "nats-3:6222"}
	tests := []struct {
		name   string
		mutate func(string) string
		want   string
	}{
		{"no JetStream", func(s string) string {
			return strings.Replace(s, "store_dir: /data/jetstream", "", 1) + "\njetstream: disabled\n"
		}, "JetStream is not enabled"},
		{"no cluster", func(s string) string { return regexp.MustCompile(`(?s)cluster \{.*?\n\}`).ReplaceAllString(s, "") }, "cluster name"},
		{"route missing", func(s string) string { return strings.Replace(s, "nats-route://nats-3:6222", "", 1) }, "routes"},
		{"fragment not included", func(s string) string { return includeLine.ReplaceAllString(s, "") }, "not in operator mode"},
		{"other client port", func(s string) string { return strings.Replace(s, "listen: 0.0.0.0:4222", "listen: 0.0.0.0:4333", 1) }, "client port 4333"},
		{"no monitoring", func(s string) string { return strings.Replace(s, "http_port: 8222", "", 1) }, "monitoring port"},
		{"wrong name", func(s string) string { return strings.Replace(s, "server_name: nats-1", "server_name: nats-9", 1) }, "server_name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			broken := tc.mutate(conf)
			if broken == conf {
				t.Fatal("the mutation changed nothing")
			}
			o, err := processNATSConfig(t, broken, frag)
			if err != nil {
				t.Fatalf("nats-server rejects the broken config outright: %v", err)
			}
			wantProblem(t, checkNATSOptions("nats-1", o, "nats-1", routes), tc.want)
		})
	}
}
