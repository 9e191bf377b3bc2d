package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serverModules are modules only the servers, their tests or the
// repository's tooling need. The agent SDK (sdk/, its own module) must not
// have them in its module graph: a third-party agent that imports
// sdk/sensorclient would otherwise download, and its go.sum would vouch
// for, the NATS server, the OpenAPI validator and their forks, the
// database driver and the rest.
var serverModules = []string{
	"github.com/rxc-project/rxc",     // the root module itself (exact)
	"github.com/nats-io/nats-server", // embedded in tests and rxc-dev
	"github.com/pb33f/",              // libopenapi, its validator and forks (OpenAPI test)
	"github.com/jackc/",              // pgx
	"github.com/sony/gobreaker",
	"github.com/kelseyhightower/envconfig",
	"github.com/prometheus/",
	"github.com/coreos/go-oidc",
	"github.com/golang-jwt/",
	"github.com/oauth2-proxy/mockoidc",
	"github.com/minio/highwayhash", // nats-server's
	"github.com/google/go-tpm",     // nats-server's
	"github.com/antithesishq/",     // nats-server's
	"go.yaml.in/yaml",
	"gopkg.in/yaml",
	"honnef.co/go/tools", // staticcheck
	"golang.org/x/vuln",  // govulncheck
}

// graphModules returns the module paths `go mod graph` names, at any
// version, sorted and each once.
func graphModules(graph string) []string {
	seen := map[string]bool{}
	var mods []string
	for _, m := range strings.Fields(graph) {
		path, _, _ := strings.Cut(m, "@")
		if !seen[path] {
			seen[path] = true
			mods = append(mods, path)
		}
	}
	slices.Sort(mods)
	return mods
}

// serverModulesIn returns the modules of mods that are server modules; the
// root module matches only exactly, so its nested modules (proto, sdk) pass.
func serverModulesIn(mods []string) []string {
	var bad []string
	for _, path := range mods {
		for _, f := range serverModules {
			if path == f || (f != "github.com/rxc-project/rxc" && strings.HasPrefix(path, f)) {
				bad = append(bad, path)
				break
			}
		}
	}
	return bad
}

// goInSDK runs the go command in sdk/ as a third party would build it: on
// its own, without the workspace.
func goInSDK(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(repoRoot(t), "sdk")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GOWORK=off go %s in sdk/: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSDKModuleGraphHoldsNoServer lists the SDK's module graph (every
// module and version `go mod graph` names, not only the selected ones) and
// fails if a server, test-only or tooling module is in it.
func TestSDKModuleGraphHoldsNoServer(t *testing.T) {
	t.Parallel()
	mods := graphModules(goInSDK(t, "mod", "graph"))
	if !slices.Contains(mods, "github.com/nats-io/nats.go") || !slices.Contains(mods, "google.golang.org/grpc") {
		t.Fatalf("the SDK's module graph lacks nats.go or grpc; the listing is not what it seems: %q", mods)
	}
	for _, m := range serverModulesIn(mods) {
		t.Errorf("the SDK's module graph holds %s; move what needs it out of sdk/", m)
	}
}

// TestSDKPackagesStandAlone resolves every import of the SDK's packages and
// their tests without the workspace: one that reached into the root module
// (a server package, a test harness) fails here before it fails a third
// party.
func TestSDKPackagesStandAlone(t *testing.T) {
	t.Parallel()
	deps := goInSDK(t, "list", "-deps", "-test", "./...")
	if !strings.Contains(deps, "github.com/rxc-project/rxc/sdk/sensorclient\n") {
		t.Fatalf("go list in sdk/ did not list sensorclient:\n%s", deps)
	}
	for _, d := range strings.Fields(deps) {
		if strings.HasPrefix(d, "github.com/rxc-project/rxc/") && !strings.HasPrefix(d, "github.com/rxc-project/rxc/sdk/") &&
			!strings.HasPrefix(d, "github.com/rxc-project/rxc/proto") {
			t.Errorf("the SDK (or its tests) imports %s from the root module", d)
		}
	}
}

// TestServerModulesInFindsThem: the root module's own graph holds the
// server modules, so the check above can fail.
func TestServerModulesInFindsThem(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "mod", "graph")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go mod graph: %v\n%s", err, out)
	}
	found := serverModulesIn(graphModules(string(out)))
	for _, want := range []string{"github.com/rxc-project/rxc", "github.com/nats-io/nats-server/v2", "github.com/pb33f/libopenapi", "github.com/jackc/pgx/v5", "github.com/oauth2-proxy/mockoidc", "honnef.co/go/tools"} {
		if !slices.Contains(found, want) {
			t.Errorf("serverModulesIn missed %s in the root module's graph; found %q", want, found)
		}
	}
	if got := serverModulesIn([]string{"github.com/rxc-project/rxc/proto", "github.com/rxc-project/rxc/sdk", "google.golang.org/grpc"}); len(got) != 0 {
		t.Errorf("nested modules and grpc reported: %q", got)
	}
}
