package deploy

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
)

type compose struct {
	Services map[string]*service `yaml:"services"`
	Volumes  map[string]any      `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       *build            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Expose      []string          `yaml:"expose"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	ReadOnly bool     `yaml:"read_only"`
	CapDrop  []string `yaml:"cap_drop"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// ours maps each service running one of our images to that image and how it
// is built.
var ours = map[string]struct{ image, context, dockerfile string }{
	"provisioner-init":  {"rxc-provisioner", "..", "deploy/provisioner.Dockerfile"},
	"provisioner":       {"rxc-provisioner", "..", "deploy/provisioner.Dockerfile"},
	"controlplane-init": {"rxc-controlplane", "..", "deploy/controlplane.Dockerfile"},
	"controlplane":      {"rxc-controlplane", "..", "deploy/controlplane.Dockerfile"},
	"frontend":          {"rxc-console", "../web", ""},
}

var natsNode = regexp.MustCompile(`^nats-\d+$`)

// secretVars must come from .env, never be written into the compose file.
var secretVars = []string{"POSTGRES_PASSWORD", "ACCOUNT_SEED_ENCRYPTION_KEY", "BACKEND_SHARED_SECRET",
	"NATS_PROVISIONER_SHARED_SECRET", "BOOTSTRAP_OPERATOR_PASSWORD"}

func loadCompose(t testing.TB) *compose {
	t.Helper()
	var c compose
	if err := yaml.Unmarshal([]byte(readFile(t, "compose.yaml")), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return &c
}

// loadDotenv reads .env.example as docker compose reads .env.
func loadDotenv(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, ".env.example")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf(".env.example: %q is not NAME=value", line)
		}
		out[k] = v
	}
	return out
}

var reference = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate substitutes ${NAME}, ${NAME:-default} and ${NAME:?message}
// the way docker compose does, and reports names without a value.
func interpolate(s string, vars map[string]string) (string, []string) {
	var missing []string
	out := reference.ReplaceAllStringFunc(s, func(m string) string {
		g := reference.FindStringSubmatch(m)
		if v, ok := vars[g[1]]; ok && (v != "" || !strings.HasPrefix(g[2], ":")) {
			return v
		}
		if g[2] == ":-" || g[2] == "-" {
			return g[3]
		}
		missing = append(missing, g[1])
		return ""
	})
	return out, missing
}

// imageRepo is an image reference without its tag.
func imageRepo(image string) string {
	repo, _, _ := strings.Cut(image, ":")
	return repo
}

// containerPort is the container side of "host:container[/proto]".
func containerPort(spec string) int {
	spec, _, _ = strings.Cut(spec, "/")
	p, err := strconv.Atoi(spec[strings.LastIndex(spec, ":")+1:])
	if err != nil {
		return -1
	}
	return p
}

type mount struct{ source, target string }

func mounts(s *service) []mount {
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out = append(out, mount{parts[0], parts[1]})
		}
	}
	return out
}

func isNamed(source string) bool {
	return !strings.HasPrefix(source, ".") && !strings.HasPrefix(source, "/")
}

// volumeHolding names the volume a path lives on and the path inside it.
func volumeHolding(s *service, path string) (volume, rel string) {
	for _, m := range mounts(s) {
		if r, err := filepath.Rel(m.target, path); err == nil && !strings.HasPrefix(r, "..") && isNamed(m.source) {
			return m.source, r
		}
	}
	return "", ""
}

// flag returns the value after name in args.
func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func flags(args []string, name string) []string {
	var out []string
	for i, a := range args {
		if a == name && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// composeCheck is one run of the compose rules: the file, what the
// binaries read, and what the rules found so far.
type composeCheck struct {
	c        *compose
	cmds     commands
	dotenv   map[string]string
	readConf func(hostPath string) (string, error)
	problems []string

	envs             map[string]map[string]string // service → variable → value, .env applied
	nodes            []string                     // the nats-server services
	pEnv, cEnv, wEnv map[string]envVar            // what provisioner serve, controlplane serve and the console read
	pPort            int                          // the provisioner's port
}

func (k *composeCheck) add(format string, args ...any) {
	k.problems = append(k.problems, fmt.Sprintf(format, args...))
}

// svc is the named service, or an empty one.
func (k *composeCheck) svc(name string) *service {
	if s := k.c.Services[name]; s != nil {
		return s
	}
	return &service{}
}

// published lists the container ports s publishes.
func (k *composeCheck) published(s *service) []int {
	var ps []int
	for _, p := range s.Ports {
		ps = append(ps, containerPort(p))
	}
	return ps
}

// checkCompose applies every rule to the compose file, one group after the
// other (later groups use what earlier ones read); readConf returns the
// nats-server config file a service mounts from the host.
func checkCompose(c *compose, cmds commands, dotenv map[string]string, readConf func(hostPath string) (string, error)) []string {
	k := &composeCheck{c: c, cmds: cmds, dotenv: dotenv, readConf: readConf, envs: map[string]map[string]string{}}
	for _, rules := range []func(){k.services, k.images, k.ports, k.natsCluster, k.operatorFragment, k.keys, k.startOrder} {
		rules()
	}
	return k.problems
}

// services: every service the stack needs is there.
func (k *composeCheck) services() {
	c, add := k.c, k.add
	for _, name := range []string{"postgres", "provisioner-init", "provisioner", "controlplane-init", "controlplane", "frontend"} {
		if c.Services[name] == nil {
			add("missing service %s", name)
		}
	}

}

// images: images, what each service runs, its environment and hardening.
func (k *composeCheck) images() {
	c, cmds, dotenv, add, svc := k.c, k.cmds, k.dotenv, k.add, k.svc
	// Images and what each service runs.
	envs := k.envs
	var nodes []string
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		for _, n := range sortedKeys(s.Environment) {
			v := s.Environment[n]
			if slices.Contains(secretVars, n) && v != "" && !strings.HasPrefix(v, "${") {
				add("service %s: %s is a literal secret; take it from .env with ${…}", name, n)
			}
			val, missing := interpolate(v, dotenv)
			for _, m := range missing {
				add("service %s: %s uses ${%s}, which .env.example does not define", name, n, m)
			}
			if envs[name] == nil {
				envs[name] = map[string]string{}
			}
			envs[name][n] = val
		}
		switch {
		case natsNode.MatchString(name):
			nodes = append(nodes, name)
			k.problems = append(k.problems, checkNATSImage("service "+name, s.Image)...)
		case name == "postgres":
			if !strings.HasPrefix(s.Image, "postgres:") {
				add("service postgres: image %q is not postgres", s.Image)
			}
			if s.Healthcheck == nil {
				add("service postgres: no healthcheck")
			}
		}
		want, ok := ours[name]
		if !ok {
			continue
		}
		if imageRepo(s.Image) != want.image {
			add("service %s: image %q, want %s", name, s.Image, want.image)
		}
		if s.Build == nil || s.Build.Context != want.context || s.Build.Dockerfile != want.dockerfile {
			add("service %s: build %+v, want context %s dockerfile %q", name, s.Build, want.context, want.dockerfile)
		}
		sub := ""
		if want.image != "rxc-console" {
			if len(s.Command) == 0 {
				add("service %s: no command", name)
				continue
			}
			sub = s.Command[0]
		}
		env, err := cmds.lookup(want.image, sub)
		if err != nil {
			add("service %s: %v", name, err)
			continue
		}
		k.problems = append(k.problems, checkEnv("service "+name, env, envs[name])...)
		if !s.ReadOnly {
			add("service %s: read_only is not set", name)
		}
		if !slices.Contains(s.CapDrop, "ALL") {
			add("service %s: cap_drop does not drop ALL", name)
		}
	}
	if envs["controlplane"]["NATS_PROVISIONER_SHARED_SECRET"] != envs["provisioner"]["BACKEND_SHARED_SECRET"] ||
		svc("controlplane").Environment["NATS_PROVISIONER_SHARED_SECRET"] != svc("provisioner").Environment["BACKEND_SHARED_SECRET"] {
		add("the control plane's NATS_PROVISIONER_SHARED_SECRET is not the provisioner's BACKEND_SHARED_SECRET")
	}
	k.nodes = nodes
}

// ports: the apps' listen addresses are the defaults, and published.
func (k *composeCheck) ports() {
	c, cmds, envs, add, svc, published := k.c, k.cmds, k.envs, k.add, k.svc, k.published
	// Ports: the apps' listen addresses are the defaults, and published.
	k.pEnv, _ = cmds.lookup("rxc-provisioner", "serve")
	k.cEnv, _ = cmds.lookup("rxc-controlplane", "serve")
	k.wEnv, _ = cmds.lookup("rxc-console", "")
	pEnv, cEnv, wEnv := k.pEnv, k.cEnv, k.wEnv
	listens := func(name, addr string, want int) int {
		p, err := listenPort(addr)
		if err != nil || p != want {
			add("service %s listens on %q, want port %d", name, addr, want)
		}
		return p
	}
	pPort := listens("provisioner", effective(pEnv, envs["provisioner"], "LISTEN_ADDR"), provisionerPort)
	if !slices.Contains(svc("provisioner").Expose, strconv.Itoa(pPort)) {
		add("service provisioner does not expose %d", pPort)
	}
	if len(svc("provisioner").Ports) > 0 {
		add("service provisioner publishes ports on the host; its API is internal")
	}
	// Published ports stay on loopback unless the operator names an address in .env.
	for _, name := range sortedKeys(c.Services) {
		for _, p := range c.Services[name].Ports {
			if !strings.HasPrefix(p, "${RXC_PUBLISH_ADDR:-127.0.0.1}:") {
				add("service %s publishes %q on every interface; want ${RXC_PUBLISH_ADDR:-127.0.0.1}:host:container", name, p)
			}
		}
	}
	// Every long-running service says when it is healthy (the one-shot *-init services complete).
	for _, name := range sortedKeys(c.Services) {
		if !strings.HasSuffix(name, "-init") && c.Services[name].Healthcheck == nil {
			add("service %s: no healthcheck", name)
		}
	}
	for _, p := range []int{
		listens("controlplane", effective(cEnv, envs["controlplane"], "LISTEN_ADDR"), apiPort),
		listens("controlplane", effective(cEnv, envs["controlplane"], "GRPC_LISTEN_ADDR"), grpcPort),
	} {
		if !slices.Contains(published(svc("controlplane")), p) {
			add("service controlplane does not publish container port %d", p)
		}
	}
	if wp, _ := strconv.Atoi(effective(wEnv, envs["frontend"], "RXC_LISTEN_PORT")); wp != consolePort || !slices.Contains(published(svc("frontend")), wp) {
		add("service frontend: listens on %d and publishes %v, want %d", wp, published(svc("frontend")), consolePort)
	}
	k.pPort = pPort
}

// natsCluster: the nats cluster and who connects to it.
func (k *composeCheck) natsCluster() {
	c, dotenv, envs, nodes, add, svc, published := k.c, k.dotenv, k.envs, k.nodes, k.add, k.svc, k.published
	pEnv, cEnv, pPort := k.pEnv, k.cEnv, k.pPort
	// The nats cluster and who connects to it.
	if len(nodes) != 3 {
		add("%d nats-server services (%v), want a cluster of 3", len(nodes), nodes)
	}
	if r := effective(pEnv, envs["provisioner"], "COMMAND_STREAM_REPLICAS"); r != strconv.Itoa(len(nodes)) {
		add("provisioner COMMAND_STREAM_REPLICAS = %q, want the %d cluster nodes", r, len(nodes))
	}
	if r, c := effective(pEnv, envs["provisioner"], "COMMAND_STREAM_RETENTION"), effective(pEnv, envs["provisioner"], "COMMAND_CONSUMER_REPLICAS"); r != "limits" || c != "1" {
		add("provisioner COMMAND_STREAM_RETENTION = %q, COMMAND_CONSUMER_REPLICAS = %q; want the cluster shape limits, 1 (docs/operations.md)", r, c)
	}
	var wantHosts []string
	for _, n := range nodes {
		wantHosts = append(wantHosts, n+":"+strconv.Itoa(natsClientPort))
		if !slices.Contains(published(svc(n)), natsClientPort) {
			add("service %s does not publish the client port %d", n, natsClientPort)
		}
	}
	for _, u := range []struct{ service, name string }{{"provisioner", "NATS_URL"}, {"controlplane", "NATS_MESSAGING_URL"}} {
		hosts, err := natsURLs(envs[u.service][u.name])
		slices.Sort(hosts)
		if err != nil || !slices.Equal(hosts, wantHosts) {
			add("service %s: %s = %q does not list the nodes %v", u.service, u.name, envs[u.service][u.name], wantHosts)
		}
	}
	k.problems = append(k.problems, checkComposeTLS(c, envs, dotenv)...)
	for _, name := range []string{"NATS_PROVISIONER_ENABLED", "NATS_MESSAGING_ENABLED"} {
		if b, _ := strconv.ParseBool(envs["controlplane"][name]); !b {
			add("service controlplane: %s is not true", name)
		}
	}
	if got, want := envs["controlplane"]["NATS_PROVISIONER_BASE_URL"], fmt.Sprintf("http://provisioner:%d", pPort); got != want {
		add("service controlplane: NATS_PROVISIONER_BASE_URL = %q, want %q", got, want)
	}
	if a, b := effective(pEnv, envs["provisioner"], "COMMAND_STREAM_NAME"), effective(cEnv, envs["controlplane"], "COMMAND_STREAM_NAME"); a != b {
		add("COMMAND_STREAM_NAME differs: provisioner %q, control plane %q", a, b)
	}

}

// operatorFragment: init-operator writes the fragment every node includes,
// and names the resolver the nodes wait for.
func (k *composeCheck) operatorFragment() {
	nodes, add, svc, pPort, readConf := k.nodes, k.add, k.svc, k.pPort, k.readConf
	// init-operator writes the fragment every node includes, and names the
	// resolver the nodes wait for.
	init := svc("provisioner-init")
	if len(init.Command) == 0 || init.Command[0] != "init-operator" {
		add("service provisioner-init does not run init-operator")
	}
	resolver := flag(init.Command, "--resolver-url")
	if err := jwtauthority.ValidateResolverURL(resolver); err != nil {
		add("provisioner-init: resolver URL %q: %v", resolver, err)
	} else if u, _ := url.Parse(resolver); u.Host != fmt.Sprintf("provisioner:%d", pPort) || u.Path != "/jwt/v1/accounts/" {
		add("provisioner-init: resolver URL %q, want http://provisioner:%d/jwt/v1/accounts/", resolver, pPort)
	}
	fragVol, fragRel := volumeHolding(init, flag(init.Command, "--nats-config"))
	if fragVol == "" {
		add("provisioner-init: --nats-config %q is not on a named volume", flag(init.Command, "--nats-config"))
	}
	for _, n := range nodes {
		s := svc(n)
		if !strings.Contains(strings.Join(s.Entrypoint, " "), "wget -q -O /dev/null "+resolver) {
			add("service %s does not wait for the resolver %s before starting nats-server", n, resolver)
		}
		if _, ok := s.DependsOn["provisioner"]; !ok {
			add("service %s: depends_on lacks provisioner", n)
		}
		if s.Healthcheck == nil {
			add("service %s: no healthcheck", n)
		}
		included := false
		for _, m := range mounts(s) {
			if isNamed(m.source) || !strings.HasSuffix(m.source, ".conf") {
				continue
			}
			conf, err := readConf(m.source)
			if err != nil {
				add("service %s: %v", n, err)
				continue
			}
			for _, inc := range regexp.MustCompile(`(?m)^\s*include\s+"([^"]+)"`).FindAllStringSubmatch(conf, -1) {
				path := filepath.Join(filepath.Dir(m.target), inc[1])
				if v, rel := volumeHolding(s, path); v == fragVol && rel == fragRel {
					included = true
				}
			}
		}
		if !included {
			add("service %s: its config does not include the fragment provisioner-init writes (%s on volume %s)", n, fragRel, fragVol)
		}
	}

}

// keys: keys live on volumes the init jobs write and the services read.
func (k *composeCheck) keys() {
	c, envs, cEnv, add, svc := k.c, k.envs, k.cEnv, k.add, k.svc
	init := svc("provisioner-init")
	// Keys live on volumes the init jobs write and the services read.
	for _, pair := range []struct{ init, serve, name string }{
		{"provisioner-init", "provisioner", "OPERATOR_SEED_PATH"},
		{"controlplane-init", "controlplane", "CA_DIR"},
	} {
		a, b := envs[pair.init][pair.name], envs[pair.serve][pair.name]
		va, ra := volumeHolding(svc(pair.init), a)
		vb, rb := volumeHolding(svc(pair.serve), b)
		if a == "" || a != b || va == "" || va != vb || ra != rb {
			add("%s: %s %q (volume %q) and %s %q (volume %q) must name the same file on one volume", pair.name, pair.init, a, va, pair.serve, b, vb)
		}
	}
	// The identity seed lives on a volume of its own that serve never mounts.
	if id := flag(init.Command, "--identity-seed"); id == "" {
		add("provisioner-init: no --identity-seed: the operator's identity key would sign accounts and stay online")
	} else if v, _ := volumeHolding(init, id); v == "" {
		add("provisioner-init: --identity-seed %q is not on a named volume", id)
	} else {
		for _, name := range sortedKeys(c.Services) {
			for _, m := range mounts(c.Services[name]) {
				if m.source == v && name != "provisioner-init" {
					add("service %s mounts %s, the volume of the operator's identity seed", name, v)
				}
			}
		}
	}
	caInit := svc("controlplane-init")
	if len(caInit.Command) == 0 || caInit.Command[0] != "init-ca" {
		add("service controlplane-init does not run init-ca")
	}
	grpcHost, _, _ := strings.Cut(effective(cEnv, envs["controlplane"], "PUBLIC_GRPC_ADDR"), ":")
	for _, want := range []string{"controlplane", grpcHost} {
		if !slices.Contains(flags(caInit.Command, "--dns"), want) {
			add("controlplane-init: the server certificate lacks --dns %s", want)
		}
	}

}

// startOrder: the start order, the health checks it relies on, and
// declared volumes.
func (k *composeCheck) startOrder() {
	c, add, svc := k.c, k.add, k.svc
	// Start order.
	for _, d := range []struct{ from, to, cond string }{
		{"provisioner-init", "postgres", "service_healthy"},
		{"provisioner", "postgres", "service_healthy"},
		{"provisioner", "provisioner-init", "service_completed_successfully"},
		{"controlplane", "postgres", "service_healthy"},
		{"controlplane", "controlplane-init", "service_completed_successfully"},
		{"controlplane", "provisioner", "service_healthy"},
		{"frontend", "controlplane", "service_healthy"},
	} {
		if got := svc(d.from).DependsOn[d.to].Condition; got != d.cond {
			add("service %s: depends_on %s with condition %q, want %q", d.from, d.to, got, d.cond)
		}
	}
	for _, name := range sortedKeys(c.Services) {
		for _, to := range sortedKeys(c.Services[name].DependsOn) {
			cond := c.Services[name].DependsOn[to].Condition
			switch {
			case c.Services[to] == nil:
				add("service %s: depends_on unknown service %s", name, to)
			case cond == "service_healthy" && c.Services[to].Healthcheck == nil:
				add("service %s: depends_on %s being healthy, which has no healthcheck", name, to)
			}
		}
	}
	// The Go services' health checks run their own binary's probe.
	for name, bin := range map[string]string{"provisioner": "/usr/local/bin/provisioner", "controlplane": "/usr/local/bin/controlplane"} {
		hc := svc(name).Healthcheck
		if hc == nil || !slices.Equal(hc.Test, []string{"CMD", bin, "healthcheck"}) {
			add("service %s: healthcheck must be [CMD %s healthcheck]", name, bin)
		}
	}
	for _, name := range sortedKeys(c.Services) {
		for _, m := range mounts(c.Services[name]) {
			if _, ok := c.Volumes[m.source]; isNamed(m.source) && !ok {
				add("service %s: volume %s is not declared", name, m.source)
			}
		}
	}
}

// pinnedTag is a tag naming a release: it starts with major.minor (and
// more), unlike "latest", "16-alpine" or "dev".
var pinnedTag = regexp.MustCompile(`^v?\d+\.\d+(\.\d+)?([-.][0-9A-Za-z.]+)*$`)

// checkComposeTLS holds compose to TLS everywhere between the services and
// to pinned images: PostgreSQL DSNs verify-full against the mounted CA of
// tls/make-certs.sh, every NATS URL tls://, nats-server nodes mount the
// certificates their configs name, PostgreSQL runs with ssl on and an
// hba_file refusing connections without TLS, every image a release tag.
func checkComposeTLS(c *compose, envs map[string]map[string]string, dotenv map[string]string) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	mounted := func(s *service, target, source string) bool {
		return slices.Contains(mounts(s), mount{source, target})
	}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		image, _ := interpolate(s.Image, dotenv)
		if _, tag, _ := strings.Cut(image, ":"); !pinnedTag.MatchString(tag) {
			add("service %s: image %q is not pinned to a release", name, image)
		}
		env := envs[name]
		for _, k := range sortedKeys(env) {
			v := env[k]
			switch {
			case k == "PG_DSN":
				u, err := url.Parse(v)
				if err != nil {
					add("service %s: PG_DSN does not parse", name)
					continue
				}
				q := u.Query()
				if q.Get("sslmode") != "verify-full" {
					add("service %s: PG_DSN sslmode %q, want verify-full", name, q.Get("sslmode"))
				}
				if root := q.Get("sslrootcert"); root == "" || !mounted(s, root, "./tls/ca.crt") {
					add("service %s: PG_DSN sslrootcert %q is not ./tls/ca.crt mounted", name, root)
				}
			case strings.Contains(k, "NATS") && strings.HasSuffix(k, "URL") && k != "NATS_PROVISIONER_BASE_URL":
				for _, one := range strings.Split(v, ",") {
					if !strings.HasPrefix(strings.TrimSpace(one), "tls://") {
						add("service %s: %s %q is not tls://", name, k, one)
					}
				}
				if !strings.HasPrefix(k, "PUBLIC_") && (env["SSL_CERT_DIR"] == "" || !mounted(s, "/etc/rxc/tls-ca/ca.crt", "./tls/ca.crt") ||
					!slices.Contains(strings.Split(env["SSL_CERT_DIR"], ":"), "/etc/rxc/tls-ca")) {
					add("service %s: connects to NATS with TLS but does not trust ./tls/ca.crt through SSL_CERT_DIR", name)
				}
			}
		}
		if natsNode.MatchString(name) {
			for _, f := range []string{"ca.crt", "nats.crt", "nats.key"} {
				if !mounted(s, "/etc/nats/tls/"+f, "./tls/"+f) {
					add("service %s: ./tls/%s is not mounted at /etc/nats/tls/%s", name, f, f)
				}
			}
		}
	}
	pg := c.Services["postgres"]
	if pg == nil {
		return problems
	}
	cmd := strings.Join(slices.Concat(pg.Entrypoint, pg.Command), " ")
	for _, want := range []string{"-c ssl=on", "-c ssl_cert_file=", "-c ssl_key_file=", "-c hba_file=/etc/rxc/pg_hba.conf"} {
		if !strings.Contains(cmd, want) {
			add("service postgres: does not run with %s", want)
		}
	}
	if !mounted(pg, "/etc/rxc/pg_hba.conf", "./postgres/pg_hba.conf") {
		add("service postgres: ./postgres/pg_hba.conf is not mounted at /etc/rxc/pg_hba.conf")
	}
	return problems
}

func readHostConf(hostPath string) (string, error) {
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return "", fmt.Errorf("config %s: %w", hostPath, err)
	}
	return string(b), nil
}

func TestComposeAgreesWithTheCode(t *testing.T) {
	t.Parallel()
	noProblems(t, "compose.yaml", checkCompose(loadCompose(t), helmCommands(t), loadDotenv(t), readHostConf))
}

func TestDotenvExampleHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	for k, v := range loadDotenv(t) {
		if slices.Contains(secretVars, k) && !strings.Contains(strings.ToLower(v), "change-me") && !strings.Contains(v, "REPLACE") {
			t.Errorf(".env.example: %s = %q looks like a real value; use a change-me placeholder", k, v)
		}
	}
}

// Each rule fails on a copy of the compose file broken in its way.
func TestComposeChecksFail(t *testing.T) {
	t.Parallel()
	cmds, dotenv := helmCommands(t), loadDotenv(t)
	tests := []struct {
		name   string
		mutate func(c *compose)
		want   string
	}{
		{"unknown variable", func(c *compose) { c.Services["provisioner"].Environment["NATS_URLS"] = "x" }, "sets NATS_URLS, which the app does not read"},
		{"required variable missing", func(c *compose) { delete(c.Services["provisioner"].Environment, "BACKEND_SHARED_SECRET") }, "does not set the required BACKEND_SHARED_SECRET"},
		{"init job variable not read by init-operator", func(c *compose) { c.Services["provisioner-init"].Environment["LISTEN_ADDR"] = ":8080" }, "provisioner-init sets LISTEN_ADDR"},
		{"console variable misspelt", func(c *compose) { c.Services["frontend"].Environment["VITE_API_URL"] = "http://x" }, "sets VITE_API_URL"},
		{"literal secret", func(c *compose) {
			c.Services["provisioner"].Environment["BACKEND_SHARED_SECRET"] = "hunter2hunter2hunter2"
		}, "literal secret"},
		{"undefined .env variable", func(c *compose) { c.Services["controlplane"].Environment["LOG_LEVEL"] = "${RXC_LOG_LEVEL:?}" }, "${RXC_LOG_LEVEL}"},
		{"wrong listen port", func(c *compose) { c.Services["controlplane"].Environment["LISTEN_ADDR"] = ":5019" }, "want port 5009"},
		{"gRPC not published", func(c *compose) { c.Services["controlplane"].Ports = []string{"5009:5009"} }, "does not publish container port 5010"},
		{"provisioner published", func(c *compose) { c.Services["provisioner"].Ports = []string{"8080:8080"} }, "publishes ports on the host"},
		{"console on every interface", func(c *compose) { c.Services["frontend"].Ports = []string{"8000:8000"} }, "publishes \"8000:8000\" on every interface"},
		{"frontend without healthcheck", func(c *compose) { c.Services["frontend"].Healthcheck = nil }, "service frontend: no healthcheck"},
		{"two replicas on three nodes", func(c *compose) { c.Services["provisioner"].Environment["COMMAND_STREAM_REPLICAS"] = "2" }, "COMMAND_STREAM_REPLICAS"},
		{"R3 consumers (the earlier shape)", func(c *compose) { c.Services["provisioner"].Environment["COMMAND_CONSUMER_REPLICAS"] = "3" }, "want the cluster shape"},
		{"work-queue retention", func(c *compose) { delete(c.Services["provisioner"].Environment, "COMMAND_STREAM_RETENTION") }, "want the cluster shape"},
		{"PostgreSQL without TLS", func(c *compose) {
			c.Services["controlplane"].Environment["PG_DSN"] = "postgres://rxc:${POSTGRES_PASSWORD}@postgres:5432/controlplane?sslmode=disable"
		}, "PG_DSN sslmode \"disable\", want verify-full"},
		{"PostgreSQL CA not mounted", func(c *compose) {
			c.Services["provisioner"].Volumes = slices.DeleteFunc(slices.Clone(c.Services["provisioner"].Volumes), func(v string) bool { return strings.HasPrefix(v, "./tls/ca.crt:") })
		}, "service provisioner: PG_DSN sslrootcert"},
		{"NATS without TLS", func(c *compose) {
			c.Services["provisioner"].Environment["NATS_URL"] = "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222"
		}, "NATS_URL \"nats://nats-1:4222\" is not tls://"},
		{"sensors told plain NATS", func(c *compose) {
			c.Services["controlplane"].Environment["PUBLIC_NATS_URL"] = "nats://localhost:4222"
		}, "PUBLIC_NATS_URL \"nats://localhost:4222\" is not tls://"},
		{"NATS CA not trusted", func(c *compose) { delete(c.Services["controlplane"].Environment, "SSL_CERT_DIR") }, "does not trust ./tls/ca.crt"},
		{"node without its key", func(c *compose) {
			c.Services["nats-2"].Volumes = slices.DeleteFunc(slices.Clone(c.Services["nats-2"].Volumes), func(v string) bool { return strings.HasPrefix(v, "./tls/nats.key:") })
		}, "service nats-2: ./tls/nats.key is not mounted"},
		{"PostgreSQL without ssl", func(c *compose) {
			e := c.Services["postgres"].Entrypoint
			e[len(e)-1] = strings.Replace(e[len(e)-1], "-c ssl=on", "", 1)
		}, "does not run with -c ssl=on"},
		{"floating postgres tag", func(c *compose) { c.Services["postgres"].Image = "postgres:16-alpine" }, "image \"postgres:16-alpine\" is not pinned"},
		{"floating own tag", func(c *compose) { c.Services["frontend"].Image = "rxc-console:latest" }, "image \"rxc-console:latest\" is not pinned"},
		{"node missing from NATS_URL", func(c *compose) {
			c.Services["controlplane"].Environment["NATS_MESSAGING_URL"] = "tls://nats-1:4222,tls://nats-2:4222"
		}, "NATS_MESSAGING_URL"},
		{"messaging off", func(c *compose) { c.Services["controlplane"].Environment["NATS_MESSAGING_ENABLED"] = "false" }, "NATS_MESSAGING_ENABLED is not true"},
		{"untested nats-server", func(c *compose) { c.Services["nats-2"].Image = "nats:2.14-alpine" }, "is no tested nats-server release"},
		{"resolver URL without slash", func(c *compose) {
			i := slices.Index(c.Services["provisioner-init"].Command, "--resolver-url")
			c.Services["provisioner-init"].Command[i+1] = "http://provisioner:8080/jwt/v1/accounts"
		}, "resolver URL"},
		{"fragment on another volume", func(c *compose) { c.Services["nats-3"].Volumes[1] = "other:/etc/nats/shared:ro" }, "nats-3: its config does not include"},
		{"node starts without waiting", func(c *compose) {
			c.Services["nats-1"].Entrypoint = []string{"nats-server", "-c", "/etc/nats/node.conf"}
		}, "does not wait for the resolver"},
		{"seed off the shared volume", func(c *compose) { c.Services["provisioner"].Environment["OPERATOR_SEED_PATH"] = "/tmp/operator.nk" }, "OPERATOR_SEED_PATH"},
		{"CA certificate without the service name", func(c *compose) { c.Services["controlplane-init"].Command = []string{"init-ca", "--dns", "localhost"} }, "--dns controlplane"},
		{"identity key online", func(c *compose) {
			c.Services["provisioner"].Volumes = append(c.Services["provisioner"].Volumes, "provisioner-identity:/var/lib/rxc-identity:ro")
		}, "service provisioner mounts provisioner-identity"},
		{"no signing key", func(c *compose) {
			cmd := c.Services["provisioner-init"].Command
			i := slices.Index(cmd, "--identity-seed")
			c.Services["provisioner-init"].Command = slices.Delete(slices.Clone(cmd), i, i+2)
		}, "no --identity-seed"},
		{"serve before init", func(c *compose) { delete(c.Services["provisioner"].DependsOn, "provisioner-init") }, "depends_on provisioner-init"},
		{"healthy without healthcheck", func(c *compose) { c.Services["postgres"].Healthcheck = nil }, "no healthcheck"},
		{"writable root", func(c *compose) { c.Services["controlplane"].ReadOnly = false }, "read_only"},
		{"capabilities kept", func(c *compose) { c.Services["provisioner"].CapDrop = nil }, "cap_drop"},
		{"wrong Dockerfile", func(c *compose) { c.Services["controlplane"].Build.Dockerfile = "deploy/provisioner.Dockerfile" }, "want context .. dockerfile \"deploy/controlplane.Dockerfile\""},
		{"undeclared volume", func(c *compose) { c.Services["controlplane"].Volumes = []string{"ca:/var/lib/rxc:ro"} }, "volume ca is not declared"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCompose(t)
			tc.mutate(c)
			wantProblem(t, checkCompose(c, cmds, dotenv, readHostConf), tc.want)
		})
	}
}
