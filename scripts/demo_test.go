package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// demo.sh -h shows rxc-dev's help without building or installing anything: on a fresh clone
// bin/rxc-dev does not exist yet. go and make are stubs here that record their arguments.
func TestDemoHelpNeedsNoBuild(t *testing.T) {
	script, err := filepath.Abs("demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"-h", "--help", "-help"} {
		t.Run(flag, func(t *testing.T) {
			bin := t.TempDir()
			calls := filepath.Join(t.TempDir(), "calls")
			record := `echo "$(basename "$0") $*" >> ` + calls
			stub(t, bin, "go", record+"\necho 'usage: rxc-dev [flags]'")
			stub(t, bin, "make", record)
			stub(t, bin, "yarn", record)
			cmd := exec.Command("bash", script, "-sensors", "5", flag)
			cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("demo.sh %s: %v\n%s", flag, err, out)
			}
			if !strings.Contains(string(out), "usage: rxc-dev") {
				t.Fatalf("demo.sh %s printed no help:\n%s", flag, out)
			}
			log, _ := os.ReadFile(calls)
			if got := strings.TrimSpace(string(log)); got != "go run ./apps/rxc-dev -h" {
				t.Fatalf("demo.sh %s ran %q, want only go run ./apps/rxc-dev -h", flag, got)
			}
		})
	}
}

// Every step of the demo says what it does and how long it took, and the console's build is
// skipped by make when no source of it changed.
func TestDemoSaysEachStep(t *testing.T) {
	data, err := os.ReadFile("demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{`step "checking prerequisites`, `step "building the Go binaries`, `step "building the console`, `done in $((SECONDS - t0)) s`} {
		if !strings.Contains(s, want) {
			t.Errorf("demo.sh lacks %q", want)
		}
	}
	mk, err := os.ReadFile("../web/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "build: dist/index.html") || !strings.Contains(string(mk), "dist/index.html: node_modules/.yarn-integrity $(BUILD_INPUTS)") {
		t.Error("web/Makefile rebuilds the console unconditionally: want dist/index.html to depend on its sources")
	}
}
