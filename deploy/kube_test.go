package deploy

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
)

const kubeDir = "kubernetes"

type meta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type object struct {
	Kind       string            `yaml:"kind"`
	Metadata   meta              `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

type workload struct {
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	Spec     struct {
		Replicas    *int   `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type podSpec struct {
	SecurityContext *securityContext `yaml:"securityContext"`
	InitContainers  []container      `yaml:"initContainers"`
	Containers      []container      `yaml:"containers"`
}

type securityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	Capabilities             *struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	EnvFrom []struct {
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *securityContext `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type kubeService struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdb struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

// manifests is the parsed kubernetes folder.
type manifests struct {
	workloads []*workload
	services  []*kubeService
	pdbs      []*pdb
	secrets   map[string]map[string]string
	configs   map[string]map[string]string
	files     []string
	resources []string
}

func loadManifests(t testing.TB) *manifests {
	t.Helper()
	m := &manifests{secrets: map[string]map[string]string{}, configs: map[string]map[string]string{}}
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" {
			var k struct {
				Resources []string `yaml:"resources"`
			}
			if err := yaml.Unmarshal([]byte(readFile(t, f)), &k); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			m.resources = k.Resources
			continue
		}
		m.files = append(m.files, base)
		docs, err := decodeAll([]byte(readFile(t, f)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			m.add(t, d)
		}
	}
	return m
}

// add files one decoded document under its kind and returns the kind
// ("" for an empty document).
func (m *manifests) add(t testing.TB, d *yaml.Node) string {
	t.Helper()
	var o object
	decode(t, d, &o)
	switch o.Kind {
	case "Deployment", "StatefulSet", "Job":
		var w workload
		decode(t, d, &w)
		m.workloads = append(m.workloads, &w)
	case "Service":
		var s kubeService
		decode(t, d, &s)
		m.services = append(m.services, &s)
	case "PodDisruptionBudget":
		var p pdb
		decode(t, d, &p)
		m.pdbs = append(m.pdbs, &p)
	case "Secret":
		m.secrets[o.Metadata.Name] = o.StringData
	case "ConfigMap":
		m.configs[o.Metadata.Name] = o.Data
	}
	return o.Kind
}

func decode(t testing.TB, n *yaml.Node, v any) {
	t.Helper()
	if err := n.Decode(v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}

func (m *manifests) workload(kind, name string) *workload {
	for _, w := range m.workloads {
		if w.Kind == kind && w.Metadata.Name == name {
			return w
		}
	}
	return &workload{}
}

// kubeApp is what the main container of one workload must look like.
type kubeApp struct {
	image             string
	ports             map[string]int
	liveness, ready   string
	replicas          int
	workloadKind      string
	probePort         string
	subcommandFromArg bool
}

var kubeApps = map[string]kubeApp{
	"rxc-provisioner":  {"rxc-provisioner", map[string]int{"http": provisionerPort}, "/healthz", "/jwt/v1/accounts/", 2, "Deployment", "http", true},
	"rxc-controlplane": {"rxc-controlplane", map[string]int{"http": apiPort, "grpc": grpcPort}, "/healthz", "/readyz", 2, "Deployment", "http", true},
	"rxc-frontend":     {"rxc-console", map[string]int{"http": consolePort}, "/healthz", "/healthz", 2, "Deployment", "http", false},
	"rxc-nats": {"nats", map[string]int{"client": natsClientPort, "cluster": natsRoutePort, "monitor": natsMonitorPort},
		"/healthz?js-enabled-only=true", "/healthz", 3, "StatefulSet", "monitor", false},
}

func checkSecurity(where string, pod, c *securityContext) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, where+": "+fmt.Sprintf(format, args...)) }
	nonRoot := func(s *securityContext) bool { return s != nil && s.RunAsNonRoot != nil && *s.RunAsNonRoot }
	if !nonRoot(c) && !nonRoot(pod) {
		add("runAsNonRoot is not set")
	}
	for _, s := range []*securityContext{pod, c} {
		if s != nil && s.RunAsUser != nil && *s.RunAsUser == 0 {
			add("runs as uid 0")
		}
	}
	if c == nil {
		return append(problems, where+": no securityContext")
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		add("allowPrivilegeEscalation is not false")
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		add("readOnlyRootFilesystem is not true")
	}
	if c.Capabilities == nil || !slices.Contains(c.Capabilities.Drop, "ALL") {
		add("capabilities do not drop ALL")
	}
	return problems
}

// containerEnv is what a container sets: its env values, and the keys of
// the Secrets it loads ("" as value: only the Secret knows).
func containerEnv(m *manifests, c container) (set, explicit map[string]string) {
	set, explicit = map[string]string{}, map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef != nil {
			for k := range m.secrets[ef.SecretRef.Name] {
				set[k] = ""
			}
		}
	}
	for _, e := range c.Env {
		set[e.Name], explicit[e.Name] = e.Value, e.Value
	}
	return set, explicit
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkManifestsFor is checkManifests with the workloads' expectations
// given (the Helm chart also exposes the control plane's metrics port).
func checkManifestsFor(m *manifests, cmds commands, kubeApps map[string]kubeApp) []string {
	mc := &manifestCheck{m: m, cmds: cmds, kubeApps: kubeApps}
	for _, rules := range []func(){mc.kustomization, mc.containers, mc.apps, mc.services, mc.natsCluster} {
		rules()
	}
	return mc.problems
}

// manifestCheck is one run of the manifest rules and what they found.
type manifestCheck struct {
	m        *manifests
	cmds     commands
	kubeApps map[string]kubeApp
	problems []string
}

func (mc *manifestCheck) add(format string, args ...any) {
	mc.problems = append(mc.problems, fmt.Sprintf(format, args...))
}

// kustomization: it lists exactly the folder's files.
func (mc *manifestCheck) kustomization() {
	m, add := mc.m, mc.add
	if got, want := slices.Sorted(slices.Values(m.resources)), slices.Sorted(slices.Values(m.files)); !slices.Equal(got, want) {
		add("kustomization.yaml lists %v, the folder holds %v", got, want)
	}
}

// containers: every container's security, resources and variables, every
// Secret key read by some container loading it, init-operator's resolver
// and identity seed.
func (mc *manifestCheck) containers() {
	m, cmds, add := mc.m, mc.cmds, mc.add
	// readers tells, per Secret key, whether a container loading the Secret reads it.
	readers := map[string]map[string]bool{}
	for _, w := range m.workloads {
		pod := w.Spec.Template.Spec
		if w.Kind != "Job" && !labelsMatch(w.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
			add("%s %s: selector does not match its pod labels", w.Kind, w.Metadata.Name)
		}
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			where := fmt.Sprintf("%s %s container %s", w.Kind, w.Metadata.Name, c.Name)
			mc.problems = append(mc.problems, checkSecurity(where, pod.SecurityContext, c.SecurityContext)...)
			for _, r := range []string{"cpu", "memory"} {
				if c.Resources.Requests[r] == "" || c.Resources.Limits[r] == "" {
					add("%s: no %s request and limit", where, r)
				}
			}
			// Our images: every variable real, the required ones set.
			repo := imageRepo(c.Image)
			if _, ok := cmds[repo]; !ok {
				continue
			}
			sub := ""
			if repo != "rxc-console" {
				if len(c.Args) == 0 {
					add("%s: no subcommand in args", where)
					continue
				}
				sub = c.Args[0]
			}
			env, err := cmds.lookup(repo, sub)
			if err != nil {
				add("%s: %v", where, err)
				continue
			}
			set, explicit := containerEnv(m, c)
			// A Secret may serve several subcommands: its keys are checked
			// below against all containers loading it.
			mc.problems = append(mc.problems, unknownVars(where, env, explicit)...)
			mc.problems = append(mc.problems, missingVars(where, env, set)...)
			for _, ef := range c.EnvFrom {
				if ef.SecretRef == nil {
					continue
				}
				if _, ok := m.secrets[ef.SecretRef.Name]; !ok {
					add("%s: loads Secret %s, which is not defined", where, ef.SecretRef.Name)
				}
				for k := range m.secrets[ef.SecretRef.Name] {
					if readers[ef.SecretRef.Name] == nil {
						readers[ef.SecretRef.Name] = map[string]bool{}
					}
					_, reads := env[k]
					readers[ef.SecretRef.Name][k] = readers[ef.SecretRef.Name][k] || reads
				}
			}
			if sub == "init-operator" {
				mc.problems = append(mc.problems, checkKubeResolver(m, flag(c.Args, "--resolver-url"))...)
				// The identity seed stays beside the Job's copy of the seed, on its own
				// volume: only the signing key is published to the serving pods.
				set, _ := containerEnv(m, c)
				id, seed := flag(c.Args, "--identity-seed"), set["OPERATOR_SEED_PATH"]
				if id == "" || id == seed || path.Dir(id) != path.Dir(seed) {
					add("%s: init-operator --identity-seed %q must name a file beside OPERATOR_SEED_PATH %q (the Job's volume), so the identity key never reaches a serving pod", where, id, seed)
				}
			}
		}
	}

	for _, name := range sortedKeys(readers) {
		for _, k := range sortedKeys(readers[name]) {
			if !readers[name][k] {
				add("Secret %s: key %s is read by no container that loads it", name, k)
			}
		}
	}
}

// apps: each app's workload, replicas, ports, listen addresses, probes and
// disruption budget.
func (mc *manifestCheck) apps() {
	m, cmds, kubeApps, add := mc.m, mc.cmds, mc.kubeApps, mc.add
	for _, name := range sortedKeys(kubeApps) {
		app := kubeApps[name]
		w := m.workload(app.workloadKind, name)
		if w.Metadata.Name == "" {
			add("no %s %s", app.workloadKind, name)
			continue
		}
		if w.Spec.Replicas == nil || *w.Spec.Replicas != app.replicas {
			add("%s %s: replicas %v, want %d", w.Kind, name, w.Spec.Replicas, app.replicas)
		}
		var main *container
		for i, c := range w.Spec.Template.Spec.Containers {
			if imageRepo(c.Image) == app.image {
				main = &w.Spec.Template.Spec.Containers[i]
			}
		}
		if main == nil {
			add("%s %s: no container runs %s", w.Kind, name, app.image)
			continue
		}
		ports := map[string]int{}
		for _, p := range main.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if !maps.Equal(ports, app.ports) {
			add("%s %s: container ports %v, want %v", w.Kind, name, ports, app.ports)
		}
		if app.subcommandFromArg {
			env, _ := cmds.lookup(app.image, "serve")
			set, _ := containerEnv(m, *main)
			for _, pn := range []string{"http", "grpc", "metrics"} {
				addr := map[string]string{"http": "LISTEN_ADDR", "grpc": "GRPC_LISTEN_ADDR", "metrics": "METRICS_LISTEN_ADDR"}[pn]
				if want, ok := app.ports[pn]; ok {
					if p, err := listenPort(effective(env, set, addr)); err != nil || p != want {
						add("%s %s: %s %q does not listen on the %s port %d", w.Kind, name, addr, effective(env, set, addr), pn, want)
					}
				}
			}
		}
		for _, pr := range []struct {
			kind string
			p    *probe
			path string
		}{{"liveness", main.LivenessProbe, app.liveness}, {"readiness", main.ReadinessProbe, app.ready}} {
			switch {
			case pr.p == nil || pr.p.HTTPGet == nil:
				add("%s %s: no HTTP %s probe", w.Kind, name, pr.kind)
			case pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port != app.probePort:
				add("%s %s: %s probe %s on port %s, want %s on %s", w.Kind, name, pr.kind, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port, pr.path, app.probePort)
			}
		}
		covered := false
		for _, p := range m.pdbs {
			covered = covered || labelsMatch(p.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels)
		}
		if !covered {
			add("%s %s: no PodDisruptionBudget", w.Kind, name)
		}
	}
}

// services: Services select pods and name ports those pods have.
func (mc *manifestCheck) services() {
	m, add := mc.m, mc.add
	// Services select pods and name ports those pods have.
	for _, s := range m.services {
		var target *workload
		for _, w := range m.workloads {
			if w.Kind != "Job" && labelsMatch(s.Spec.Selector, w.Spec.Template.Metadata.Labels) {
				target = w
			}
		}
		if target == nil {
			add("Service %s selects no workload", s.Metadata.Name)
			continue
		}
		for _, p := range s.Spec.Ports {
			found := false
			for _, c := range target.Spec.Template.Spec.Containers {
				for _, cp := range c.Ports {
					found = found || cp.Name == p.TargetPort
				}
			}
			if !found {
				add("Service %s: targetPort %q is no port of %s", s.Metadata.Name, p.TargetPort, target.Metadata.Name)
			}
		}
	}
}

// natsCluster: the JetStream cluster's StatefulSet, headless Service, image,
// store, TLS, and the provisioner's stream replicas.
func (mc *manifestCheck) natsCluster() {
	m, cmds, add := mc.m, mc.cmds, mc.add
	// The JetStream cluster.
	nats := m.workload("StatefulSet", "rxc-nats")
	var headless *kubeService
	for _, s := range m.services {
		if s.Metadata.Name == nats.Spec.ServiceName {
			headless = s
		}
	}
	if headless == nil || headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		add("StatefulSet rxc-nats: serviceName %q must be a headless Service publishing not-ready addresses", nats.Spec.ServiceName)
	}
	for _, c := range slices.Concat(nats.Spec.Template.Spec.InitContainers, nats.Spec.Template.Spec.Containers) {
		if imageRepo(c.Image) == "nats" {
			mc.problems = append(mc.problems, checkNATSImage("StatefulSet rxc-nats container "+c.Name, c.Image)...)
		}
	}
	if len(nats.Spec.VolumeClaimTemplates) == 0 {
		add("StatefulSet rxc-nats: no volumeClaimTemplates for the JetStream store")
	}
	mc.problems = append(mc.problems, checkNATSTLS(m)...)
	prov := m.workload("Deployment", "rxc-provisioner")
	for _, c := range prov.Spec.Template.Spec.Containers {
		if imageRepo(c.Image) != "rxc-provisioner" {
			continue
		}
		env, _ := cmds.lookup("rxc-provisioner", "serve")
		set, _ := containerEnv(m, c)
		if nats.Spec.Replicas == nil || effective(env, set, "COMMAND_STREAM_REPLICAS") != strconv.Itoa(*nats.Spec.Replicas) {
			add("provisioner COMMAND_STREAM_REPLICAS = %q, want the nats replicas", effective(env, set, "COMMAND_STREAM_REPLICAS"))
		}
		// The cluster shape: limits retention, one replica per sensor
		// consumer (docs/operations.md, "Cluster shape").
		if r, c := effective(env, set, "COMMAND_STREAM_RETENTION"), effective(env, set, "COMMAND_CONSUMER_REPLICAS"); r != "limits" || c != "1" {
			add("provisioner COMMAND_STREAM_RETENTION = %q, COMMAND_CONSUMER_REPLICAS = %q; want the cluster shape limits, 1", r, c)
		}
	}
}

// checkNATSTLS: every NATS address a container is given is tls://, and a container that connects
// to NATS itself trusts the CA it is verified with: SSL_CERT_DIR names a folder that is mounted.
func checkNATSTLS(m *manifests) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	tlsURL := regexp.MustCompile(`^tls://[a-z0-9.-]+:4222$`)
	for _, w := range m.workloads {
		pod := w.Spec.Template.Spec
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			where := fmt.Sprintf("%s %s container %s", w.Kind, w.Metadata.Name, c.Name)
			set, _ := containerEnv(m, c)
			connects := false
			for _, name := range []string{"NATS_URL", "NATS_MESSAGING_URL", "PUBLIC_NATS_URL"} {
				v, ok := set[name]
				if !ok {
					continue
				}
				connects = connects || name != "PUBLIC_NATS_URL"
				for _, u := range strings.Split(v, ",") {
					if !tlsURL.MatchString(u) {
						add("%s: %s has %q, want tls://host:4222", where, name, u)
					}
				}
			}
			if !connects {
				continue
			}
			trusted := false
			for _, dir := range strings.Split(set["SSL_CERT_DIR"], ":") {
				for _, vm := range c.VolumeMounts {
					trusted = trusted || (dir != "" && vm.MountPath == dir)
				}
			}
			if !trusted {
				add("%s: connects to NATS with TLS but mounts no CA in SSL_CERT_DIR (%q)", where, set["SSL_CERT_DIR"])
			}
		}
	}
	return problems
}

// checkKubeResolver: init-operator names the provisioner Service's resolver.
func checkKubeResolver(m *manifests, resolver string) []string {
	if err := jwtauthority.ValidateResolverURL(resolver); err != nil {
		return []string{fmt.Sprintf("init-operator --resolver-url %q: %v", resolver, err)}
	}
	u, _ := url.Parse(resolver)
	for _, s := range m.services {
		for _, p := range s.Spec.Ports {
			if u.Host == fmt.Sprintf("%s:%d", s.Metadata.Name, p.Port) && p.Port == provisionerPort && u.Path == "/jwt/v1/accounts/" {
				return nil
			}
		}
	}
	return []string{fmt.Sprintf("init-operator --resolver-url %q is not the provisioner Service's /jwt/v1/accounts/", resolver)}
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	noProblems(t, "deploy/kubernetes", checkManifestsFor(loadManifests(t), helmCommands(t), helmApps(t)))
}

// Each rule fails on a copy of the manifests broken in its way.
func TestKubernetesChecksFail(t *testing.T) {
	t.Parallel()
	cmds := helmCommands(t)
	mainOf := func(m *manifests, kind, name string) *container {
		return &m.workload(kind, name).Spec.Template.Spec.Containers[0]
	}
	tests := []struct {
		name   string
		mutate func(m *manifests)
		want   string
	}{
		{"no readiness probe", func(m *manifests) { mainOf(m, "Deployment", "rxc-controlplane").ReadinessProbe = nil }, "rxc-controlplane: no HTTP readiness probe"},
		{"readiness on liveness path", func(m *manifests) {
			mainOf(m, "Deployment", "rxc-controlplane").ReadinessProbe.HTTPGet.Path = "/healthz"
		}, "want /readyz"},
		{"no limits", func(m *manifests) { mainOf(m, "Deployment", "rxc-frontend").Resources.Limits = nil }, "no cpu request and limit"},
		{"writable root", func(m *manifests) {
			f := false
			mainOf(m, "Deployment", "rxc-provisioner").SecurityContext.ReadOnlyRootFilesystem = &f
		}, "readOnlyRootFilesystem is not true"},
		{"capabilities kept", func(m *manifests) { mainOf(m, "StatefulSet", "rxc-nats").SecurityContext.Capabilities = nil }, "do not drop ALL"},
		{"root allowed", func(m *manifests) {
			w := m.workload("Job", "rxc-provisioner-init")
			w.Spec.Template.Spec.SecurityContext = nil
			for i := range w.Spec.Template.Spec.InitContainers {
				w.Spec.Template.Spec.InitContainers[i].SecurityContext.RunAsNonRoot = nil
			}
		}, "runAsNonRoot is not set"},
		{"unknown variable", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-controlplane")
			c.Env[0].Name = "HTTP_LISTEN_ADDR"
		}, "sets HTTP_LISTEN_ADDR"},
		{"misspelt Secret key", func(m *manifests) { m.secrets["rxc-controlplane"]["NATS_PROVISIONER_SECRET"] = "x" }, "key NATS_PROVISIONER_SECRET is read by no container"},
		{"required variable in no Secret", func(m *manifests) { delete(m.secrets["rxc-provisioner"], "BACKEND_SHARED_SECRET") }, "does not set the required BACKEND_SHARED_SECRET"},
		{"one provisioner", func(m *manifests) { one := 1; m.workload("Deployment", "rxc-provisioner").Spec.Replicas = &one }, "replicas"},
		{"wrong container port", func(m *manifests) { mainOf(m, "Deployment", "rxc-provisioner").Ports[0].ContainerPort = 8081 }, "container ports"},
		{"identity key signs", func(m *manifests) {
			c := &m.workload("Job", "rxc-provisioner-init").Spec.Template.Spec.InitContainers[0]
			i := slices.Index(c.Args, "--identity-seed")
			c.Args = slices.Delete(slices.Clone(c.Args), i, i+2)
		}, "init-operator --identity-seed \"\" must name a file"},
		{"no PDB", func(m *manifests) { m.pdbs = m.pdbs[:0] }, "no PodDisruptionBudget"},
		{"control plane metrics port missing", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-controlplane")
			c.Ports = slices.DeleteFunc(c.Ports, func(p struct {
				Name          string `yaml:"name"`
				ContainerPort int    `yaml:"containerPort"`
			}) bool {
				return p.Name == "metrics"
			})
		}, "rxc-controlplane: container ports"},
		{"metrics listener elsewhere", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-controlplane")
			for i := range c.Env {
				if c.Env[i].Name == "METRICS_LISTEN_ADDR" {
					c.Env[i].Value = ":9092"
				}
			}
		}, "METRICS_LISTEN_ADDR \":9092\" does not listen on the metrics port"},
		{"untested nats-server", func(m *manifests) { mainOf(m, "StatefulSet", "rxc-nats").Image = "nats:2.14.9-alpine" }, "is no tested nats-server release"},
		{"Service port name unknown", func(m *manifests) { m.services[0].Spec.Ports[0].TargetPort = "web" }, "targetPort \"web\""},
		{"routes need not-ready addresses", func(m *manifests) {
			for _, s := range m.services {
				s.Spec.PublishNotReadyAddresses = false
			}
		}, "headless Service"},
		{"file not in kustomization", func(m *manifests) { m.resources = m.resources[1:] }, "kustomization.yaml lists"},
		{"plain NATS for clients", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-controlplane")
			for i := range c.Env {
				if c.Env[i].Name == "NATS_MESSAGING_URL" {
					c.Env[i].Value = "nats://rxc-nats-0.rxc-nats-headless:4222"
				}
			}
		}, "want tls://host:4222"},
		{"NATS CA not mounted", func(m *manifests) {
			mainOf(m, "Deployment", "rxc-provisioner").VolumeMounts = nil
		}, "mounts no CA in SSL_CERT_DIR"},
		{"replicas above the cluster", func(m *manifests) {
			five := 5
			m.workload("StatefulSet", "rxc-nats").Spec.Replicas = &five
		}, "COMMAND_STREAM_REPLICAS"},
		{"R3 consumers (the earlier shape)", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-provisioner")
			for i := range c.Env {
				if c.Env[i].Name == "COMMAND_CONSUMER_REPLICAS" {
					c.Env[i].Value = "3"
				}
			}
		}, "want the cluster shape"},
		{"work-queue retention", func(m *manifests) {
			c := mainOf(m, "Deployment", "rxc-provisioner")
			for i := range c.Env {
				if c.Env[i].Name == "COMMAND_STREAM_RETENTION" {
					c.Env[i].Value = "workqueue"
				}
			}
		}, "want the cluster shape"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := loadManifests(t)
			tc.mutate(m)
			wantProblem(t, checkManifestsFor(m, cmds, helmApps(t)), tc.want)
		})
	}
}

// The nats-server config in the ConfigMap is accepted by nats-server's
// parser as node 0 of the StatefulSet would read it.
func TestKubernetesNATSConfig(t *testing.T) {
	m := loadManifests(t)
	conf, ok := m.configs["rxc-nats-config"]["nats.conf"]
	if !ok {
		t.Fatal("ConfigMap rxc-nats-config has no nats.conf")
	}
	nats := m.workload("StatefulSet", "rxc-nats")
	if nats.Spec.Replicas == nil {
		t.Fatal("StatefulSet rxc-nats has no replicas")
	}
	var routes []string
	for i := range *nats.Spec.Replicas {
		routes = append(routes, fmt.Sprintf("rxc-nats-%d.%s:%d", i, nats.Spec.ServiceName, natsRoutePort))
	}
	conf = strings.ReplaceAll(conf, "/etc/nats/tls/", writeTestCerts(t)+"/")
	t.Setenv("POD_NAME", "rxc-nats-0")
	o, err := processNATSConfig(t, conf, operatorFragment(t, "http://rxc-provisioner:8080/jwt/v1/accounts/"))
	if err != nil {
		t.Fatalf("nats-server rejects the ConfigMap's nats.conf: %v", err)
	}
	problems := checkNATSOptions("rxc-nats-config", o, "rxc-nats-0", routes)
	if o.TLSConfig == nil || len(o.TLSConfig.Certificates) == 0 {
		problems = append(problems, "client connections without TLS")
	}
	if o.Cluster.TLSConfig == nil || o.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		problems = append(problems, "cluster routes without verified TLS")
	}
	noProblems(t, "rxc-nats-config", problems)
	if !strings.Contains(conf, "$POD_NAME") {
		t.Error("server_name does not come from POD_NAME: every node would have the same name")
	}
}
