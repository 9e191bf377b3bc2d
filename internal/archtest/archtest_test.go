// Package archtest holds the repository's structural rules as tests: core
// imports no infrastructure, no binary links the testing package, every
// package is documented, no build output is committed.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden lists import path prefixes that core must never reach, directly
// or transitively.
var forbidden = []string{
	"github.com/rxc-project/rxc/adapters",
	"github.com/rxc-project/rxc/apps",
	"github.com/jackc/",
	"github.com/nats-io/",
	"google.golang.org/grpc",
	"github.com/sony/gobreaker",
	"github.com/kelseyhightower/envconfig",
	"net/http",
	"database/sql",
}

func TestCoreImportsNoInfrastructure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/rxc-project/rxc/core/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 3 {
		t.Fatalf("go list returned %d packages; the rule would pass vacuously", len(deps))
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) {
				t.Errorf("core depends on %s (matches forbidden %q)", d, f)
			}
		}
	}
}
