package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// binaries are the programs RXC ships or runs outside `go test`.
var binaries = []string{
	"github.com/rxc-project/rxc/apps/provisioner",
	"github.com/rxc-project/rxc/apps/controlplane",
	"github.com/rxc-project/rxc/apps/sensor-agent",
	"github.com/rxc-project/rxc/apps/rxc-dev",
}

// TestBinariesDoNotLinkTesting keeps test harnesses out of the binaries:
// linking the testing package adds its flags and code to a program that
// never runs tests, and is the sign that a harness leaked into production
// code.
func TestBinariesDoNotLinkTesting(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin[strings.LastIndex(bin, "/")+1:], func(t *testing.T) {
			t.Parallel()
			deps := listDeps(t, bin)
			for _, d := range deps {
				if d == "testing" || strings.HasPrefix(d, "testing/") {
					t.Errorf("%s links %s; see `go list -deps %s` for the path", bin, d, bin)
				}
			}
		})
	}
}

// listDeps returns bin's transitive imports, failing when the list is too
// short to mean anything.
func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	// Every binary uses net/http; without it the list is not what it seems.
	found := false
	for _, d := range deps {
		found = found || d == "net/http" || d == "net"
	}
	if len(deps) < 20 || !found {
		t.Fatalf("go list -deps %s returned %d packages; the rule would pass vacuously", pkg, len(deps))
	}
	return deps
}

// TestListDepsSeesTesting proves the check can fail: a package that imports
// testing (this harness) is reported.
func TestListDepsSeesTesting(t *testing.T) {
	deps := listDeps(t, "github.com/rxc-project/rxc/internal/pgtest")
	for _, d := range deps {
		if d == "testing" {
			return
		}
	}
	t.Fatal("go list -deps of the pgtest harness does not list testing; the binary check could not fail")
}

// TestBinariesLinkNoInternal keeps internal/ meaning one thing: technology
// harnesses for tests and load drivers (a throwaway PostgreSQL, a nats-server,
// a log buffer) and the rules, which no binary depends on, the development
// stack included. What a binary may link lives under adapters/ or apps/.
func TestBinariesLinkNoInternal(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin[strings.LastIndex(bin, "/")+1:], func(t *testing.T) {
			t.Parallel()
			for _, d := range listDeps(t, bin) {
				if strings.HasPrefix(d, internalPrefix) {
					t.Errorf("%s links %s: internal/ is for test harnesses only", bin, d)
				}
			}
		})
	}
}

const internalPrefix = "github.com/rxc-project/rxc/internal/"

// TestInternalHarnessesImportNoApp keeps app harnesses beside their apps
// (apps/provisioner/provisionertest, apps/controlplane/controlplanetest): a
// harness under internal/ that imported an app would be imported back by that
// app's own tests, and internal/ would hold more than technology.
func TestInternalHarnessesImportNoApp(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", internalPrefix+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps internal/...: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	harnesses := 0
	for _, d := range deps {
		if strings.HasPrefix(d, internalPrefix) {
			harnesses++
		}
		if strings.HasPrefix(d, "github.com/rxc-project/rxc/apps/") {
			t.Errorf("internal/ depends on %s: an app's harness lives beside the app", d)
		}
	}
	if harnesses < 3 {
		t.Fatalf("go list -deps internal/... listed %d harnesses; the rule would pass vacuously", harnesses)
	}
}

// archived are libraries whose upstream is archived: no fixes reach them, so no binary links
// them (the YAML library's maintained continuation is go.yaml.in/yaml/v3).
var archived = []string{"gopkg.in/yaml.v3", "gopkg.in/yaml.v2", "github.com/ghodss/yaml"}

// TestBinariesLinkNoArchivedLibrary keeps unmaintained code out of every binary.
func TestBinariesLinkNoArchivedLibrary(t *testing.T) {
	for _, bin := range binaries {
		t.Run(bin[strings.LastIndex(bin, "/")+1:], func(t *testing.T) {
			t.Parallel()
			for _, d := range listDeps(t, bin) {
				for _, a := range archived {
					if d == a || strings.HasPrefix(d, a+"/") {
						t.Errorf("%s links the archived %s", bin, d)
					}
				}
			}
		})
	}
}
