package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	capp "github.com/rxc-project/rxc/apps/controlplane/app"
)

// helmModule is the Helm release the chart is checked with, built from its Go module (pinned:
// no helm binary is needed on the machine, and the main go.mod stays free of Kubernetes).
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

const chartDir = "helm/rxc"

// kubeVersion is the cluster the chart is rendered for (a helm built from source assumes 1.20).
const kubeVersion = "1.31.0"

// helmBinary builds Helm once per test process into a temporary folder.
var helmBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "rxc-helm-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "install", helmModule)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=", "GOWORK=off")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v\n%s", helmModule, err, out)
	}
	return filepath.Join(dir, "helm"), nil
})

func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin, err := helmBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// testValues fill the chart's required values the way an operator would.
var testValues = []string{
	"--set", "provisioner.pgDSN=postgres://rxc:pw@db.internal:5432/provisioner?sslmode=verify-full&sslrootcert=/etc/rxc/postgres-ca/ca.crt",
	"--set", "provisioner.accountSeedEncryptionKey=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	"--set", "provisioner.backendSharedSecret=0123456789abcdef0123",
	"--set", "controlplane.pgDSN=postgres://rxc:pw@db.internal:5432/controlplane?sslmode=verify-full&sslrootcert=/etc/rxc/postgres-ca/ca.crt",
	"--set", "postgres.caSecret=postgres-ca",
}

// renderChart runs helm template and parses every document.
func renderChart(t testing.TB, extra ...string) (*manifests, map[string][]*yaml.Node, error) {
	t.Helper()
	out, err := helm(t, append([]string{"template", "rxc", chartDir, "--namespace", "rxc", "--kube-version", kubeVersion}, append(slices.Clone(testValues), extra...)...)...)
	if err != nil {
		return nil, nil, err
	}
	docs, err := decodeAll([]byte(out))
	if err != nil {
		t.Fatalf("helm template output: %v", err)
	}
	m := &manifests{secrets: map[string]map[string]string{}, configs: map[string]map[string]string{}}
	byKind := map[string][]*yaml.Node{}
	for _, d := range docs {
		if kind := m.add(t, d); kind != "" {
			byKind[kind] = append(byKind[kind], d)
		}
	}
	return m, byKind, nil
}

// helmCommands are loadCommands plus SSL_CERT_DIR, which Go's crypto/x509 reads in every binary
// (the chart, the kustomize manifests and compose add their CA to the public roots with it).
func helmCommands(t testing.TB) commands {
	cmds := loadCommands(t)
	for _, subs := range cmds {
		for _, env := range subs {
			env["SSL_CERT_DIR"] = envVar{}
		}
	}
	return cmds
}

func TestHelmChartLints(t *testing.T) {
	if _, err := helm(t, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, testValues...)...); err != nil {
		t.Fatal(err)
	}
	// Lint reports a template's fail only as information, so without values.schema.json a chart
	// that cannot render without its secrets would lint clean.
	out, err := helm(t, "lint", "--strict", "--kube-version", kubeVersion, chartDir)
	if err == nil {
		t.Fatalf("helm lint --strict without the required values passed:\n%s", out)
	}
	for _, want := range []string{"'/provisioner'", "'/controlplane'"} {
		if !strings.Contains(out+err.Error(), want) {
			t.Errorf("helm lint without values: %v\n%s\nwant the missing value %s named", err, out, want)
		}
	}
}

// The rendered chart passes every check the kustomize manifests pass (variables from the apps'
// configuration structs, ports, probes, PDBs, security contexts, tested nats-server image), and
// what the chart adds: TLS for NATS clients and routes, PostgreSQL with verify-full, pinned
// images, Ingress, NetworkPolicies, ServiceMonitor, cert-manager Certificate.
func TestHelmChartRendersAgainstTheCode(t *testing.T) {
	m, byKind, err := renderChart(t, "--set", "serviceMonitor.enabled=true", "--set", "tls.certManager.issuer=letsencrypt")
	if err != nil {
		t.Fatal(err)
	}
	problems := checkManifestsFor(withResources(m), helmCommands(t), helmApps(t))
	problems = append(problems, checkChartExtras(t, m, byKind)...)
	noProblems(t, "deploy/helm/rxc", problems)
}

// helmApps are kubeApps with the control plane's metrics listener, which the chart (for its
// ServiceMonitor) and the kustomize manifests expose (METRICS_LISTEN_ADDR).
func helmApps(t testing.TB) map[string]kubeApp {
	apps := maps.Clone(kubeApps)
	cp := apps["rxc-controlplane"]
	cp.ports = map[string]int{"http": apiPort, "grpc": grpcPort, "metrics": controlPlaneMetricsPort(t)}
	apps["rxc-controlplane"] = cp
	return apps
}

// controlPlaneMetricsPort is METRICS_LISTEN_ADDR's default port.
func controlPlaneMetricsPort(t testing.TB) int {
	env := envOf(t, &capp.ServeConfig{})
	p, err := listenPort(env["METRICS_LISTEN_ADDR"].Default)
	if err != nil {
		return -1
	}
	return p
}

func withResources(m *manifests) *manifests {
	m.files, m.resources = nil, nil
	return m
}

func checkChartExtras(t testing.TB, m *manifests, byKind map[string][]*yaml.Node) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, kind := range []string{"Ingress", "NetworkPolicy", "ServiceMonitor", "Certificate", "Job", "StatefulSet"} {
		if len(byKind[kind]) == 0 {
			add("no %s rendered", kind)
		}
	}
	tag := regexp.MustCompile(`^[^:@]+(:[^:@]+)?(@sha256:[0-9a-f]{64})?$`)
	for _, w := range m.workloads {
		pod := w.Spec.Template.Spec
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			where := fmt.Sprintf("%s %s container %s", w.Kind, w.Metadata.Name, c.Name)
			if !tag.MatchString(c.Image) || !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":latest") {
				add("%s: image %q is not pinned to a version", where, c.Image)
			}
		}
	}
	cp := m.workload("Deployment", "rxc-controlplane")
	for _, c := range cp.Spec.Template.Spec.Containers {
		if imageRepo(c.Image) != "rxc-controlplane" {
			continue
		}
		set := map[string]string{}
		for _, e := range c.Env {
			set[e.Name] = e.Value
		}
		if p, err := listenPort(set["METRICS_LISTEN_ADDR"]); err != nil || p != controlPlaneMetricsPort(t) {
			add("control plane METRICS_LISTEN_ADDR %q is not the metrics port %d", set["METRICS_LISTEN_ADDR"], controlPlaneMetricsPort(t))
		}
	}
	for _, n := range byKind["ServiceMonitor"] {
		var sm struct {
			Spec struct {
				Endpoints []struct {
					Port string `yaml:"port"`
					Path string `yaml:"path"`
				} `yaml:"endpoints"`
			} `yaml:"spec"`
		}
		if err := n.Decode(&sm); err != nil {
			add("ServiceMonitor: %v", err)
			continue
		}
		ports := map[string]bool{}
		for _, e := range sm.Spec.Endpoints {
			ports[e.Port+e.Path] = true
		}
		if !ports["http/metrics"] || !ports["metrics/metrics"] {
			add("ServiceMonitor endpoints %v, want the provisioner's http and the control plane's metrics port at /metrics", sm.Spec.Endpoints)
		}
	}
	for name, data := range m.secrets {
		if dsn, ok := data["PG_DSN"]; ok && !strings.Contains(dsn, "sslmode=verify-full") {
			add("Secret %s: PG_DSN without sslmode=verify-full", name)
		}
	}
	return problems
}

// The chart refuses values that would deploy something unsafe or broken, with a message naming
// the value.
func TestHelmChartRefusesBadValues(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		want string
	}{
		// values.schema.json refuses these before anything renders, naming the value's path.
		{"floating image tag", []string{"images.controlplane.tag=latest"}, "'/images/controlplane/tag'"},
		{"no image tag", []string{"images.provisioner.tag="}, "'/images/provisioner/tag'"},
		{"no nats-server version", []string{"nats.version="}, "'/nats/version'"},
		{"even number of NATS nodes", []string{"nats.replicas=2"}, "'/nats/replicas'"},
		{"no provisioner secrets", []string{"provisioner.backendSharedSecret="}, "'/provisioner/backendSharedSecret'"},
		{"short shared secret", []string{"provisioner.backendSharedSecret=short"}, "'/provisioner/backendSharedSecret'"},
		{"unknown log level", []string{"controlplane.logLevel=verbose"}, "'/controlplane/logLevel'"},
		// The templates refuse what a schema cannot see.
		{"DSN without TLS", []string{"controlplane.pgDSN=postgres://rxc:pw@db:5432/controlplane?sslmode=disable"}, "sslmode=verify-full"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, _, err := renderChart(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template: %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
	// Existing Secrets instead of values: nothing to refuse, and none created.
	out, err := helm(t, "template", "rxc", chartDir, "--kube-version", kubeVersion, "--set", "provisioner.existingSecret=p", "--set", "controlplane.existingSecret=c")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "kind: Secret") {
		t.Fatal("with existing Secrets the chart still creates Secrets")
	}
}

// The chart's default nats-server is the one the code is tested against.
func TestHelmChartNATSVersionIsTested(t *testing.T) {
	var v struct {
		NATS struct {
			Version string `yaml:"version"`
		} `yaml:"nats"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &v); err != nil {
		t.Fatal(err)
	}
	if p := checkNATSImage("values.yaml nats.version", "nats:"+v.NATS.Version+"-alpine"); len(p) > 0 {
		t.Fatal(p)
	}
}

// nats-server itself reads the chart's config as node 0 would, with real certificates at the
// mounted paths: TLS on client connections and on routes (verified both ways), the cluster, the
// operator fragment, JetStream.
func TestHelmChartNATSConfig(t *testing.T) {
	for _, replicas := range []int{3, 5} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			m, _, err := renderChart(t, "--set", fmt.Sprintf("nats.replicas=%d", replicas))
			if err != nil {
				t.Fatal(err)
			}
			conf := m.configs["rxc-nats-config"]["nats.conf"]
			tlsDir := writeTestCerts(t)
			conf = strings.ReplaceAll(conf, "/etc/nats/tls/", tlsDir+"/")
			t.Setenv("POD_NAME", "rxc-nats-0")
			o, err := processNATSConfig(t, conf, operatorFragment(t, "http://rxc-provisioner:8080/jwt/v1/accounts/"))
			if err != nil {
				t.Fatalf("nats-server rejects the chart's nats.conf: %v", err)
			}
			var routes []string
			for i := range replicas {
				routes = append(routes, fmt.Sprintf("rxc-nats-%d.rxc-nats-headless:%d", i, natsRoutePort))
			}
			problems := checkNATSOptions("chart nats.conf", o, "rxc-nats-0", routes)
			if o.TLSConfig == nil || len(o.TLSConfig.Certificates) == 0 {
				problems = append(problems, "client connections without TLS")
			}
			if o.Cluster.TLSConfig == nil || o.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
				problems = append(problems, "cluster routes without verified TLS")
			}
			noProblems(t, "chart nats.conf", problems)
		})
	}
}

// writeTestCerts writes ca.crt, tls.crt and tls.key as cert-manager lays them out.
func writeTestCerts(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "rxc-nats"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"rxc-nats", "*.rxc-nats-headless"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, block := range map[string]*pem.Block{
		"ca.crt": {Type: "CERTIFICATE", Bytes: caDER}, "tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Each rule of checkChartExtras fails on a rendering broken in its way.
func TestHelmChecksFail(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m *manifests, byKind map[string][]*yaml.Node)
		want   string
	}{
		{"floating tag", func(m *manifests, _ map[string][]*yaml.Node) {
			m.workload("Deployment", "rxc-frontend").Spec.Template.Spec.Containers[0].Image = "rxc-console:latest"
		}, "is not pinned"},
		{"untagged", func(m *manifests, _ map[string][]*yaml.Node) {
			m.workload("Deployment", "rxc-frontend").Spec.Template.Spec.Containers[0].Image = "rxc-console"
		}, "is not pinned"},
		{"plain NATS", func(m *manifests, _ map[string][]*yaml.Node) {
			c := &m.workload("Deployment", "rxc-provisioner").Spec.Template.Spec.Containers[0]
			for i := range c.Env {
				if c.Env[i].Name == "NATS_URL" {
					c.Env[i].Value = "nats://rxc-nats-0.rxc-nats-headless:4222"
				}
			}
		}, "want tls://"},
		{"DSN without TLS", func(m *manifests, _ map[string][]*yaml.Node) {
			m.secrets["rxc-controlplane"]["PG_DSN"] = "postgres://x@db/controlplane?sslmode=require"
		}, "PG_DSN without sslmode=verify-full"},
		{"no NetworkPolicy", func(_ *manifests, byKind map[string][]*yaml.Node) { delete(byKind, "NetworkPolicy") }, "no NetworkPolicy rendered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, byKind, err := renderChart(t, "--set", "serviceMonitor.enabled=true", "--set", "tls.certManager.issuer=letsencrypt")
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(m, byKind)
			problems := checkManifestsFor(withResources(m), helmCommands(t), helmApps(t))
			wantProblem(t, append(problems, checkChartExtras(t, m, byKind)...), tc.want)
		})
	}
}
