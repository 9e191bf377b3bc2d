package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// coreTestAdapters is the only part of adapters/ that core's tests may
// reach: the in-memory adapters, which pass the same contract suites as
// the PostgreSQL ones. Core's use-case tests run on them, so they stay fast
// and need no database, broker or network.
const coreTestAdapters = "github.com/rxc-project/rxc/adapters/memory/"

// coreTestViolations returns the packages in deps (go list -deps -test
// output over core/...) that core's tests must not reach.
func coreTestViolations(deps []string) []string {
	var bad []string
	for _, d := range deps {
		pkg, _, _ := strings.Cut(d, " ") // "p [q.test]" is p compiled for q's tests
		if strings.HasPrefix(pkg, coreTestAdapters) {
			continue
		}
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f) {
				bad = append(bad, d)
				break
			}
		}
		if strings.HasPrefix(pkg, "github.com/rxc-project/rxc/internal/") {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestCoreTestsRunOnFakes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/rxc-project/rxc/core/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var deps []string
	sawMemory := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		deps = append(deps, line)
		if strings.HasPrefix(line, coreTestAdapters) {
			sawMemory = true
		}
	}
	if !sawMemory {
		t.Fatalf("core's tests reach no in-memory adapter; the rule would pass vacuously (%d packages)", len(deps))
	}
	for _, d := range coreTestViolations(deps) {
		t.Errorf("core's tests depend on %s: use-case tests run on adapters/memory/* and the fakes beside the ports", d)
	}
}

func TestCoreTestViolationsCanFail(t *testing.T) {
	deps := []string{
		"github.com/rxc-project/rxc/core/fleet",
		"github.com/rxc-project/rxc/adapters/memory/fleetmem [github.com/rxc-project/rxc/core/fleet.test]",
		"github.com/google/go-cmp/cmp",
		"github.com/rxc-project/rxc/adapters/postgres/controlplanestore [github.com/rxc-project/rxc/core/fleet.test]",
		"github.com/jackc/pgx/v5",
		"github.com/rxc-project/rxc/internal/pgtest",
		"net/http",
	}
	got := coreTestViolations(deps)
	want := []string{deps[3], deps[4], deps[5], deps[6]}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations = %q, want %q", got, want)
	}
}
