// Package scripts holds the tests of the repository's shell scripts.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stub writes an executable shell script named name into dir.
func stub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// demo-prereqs.sh installs what `make demo` lacks when it can do so
// unasked (Yarn through npm; PostgreSQL through apt-get as root), and
// otherwise stops at once with the one command to run. Every program it
// calls is a stub on a PATH of its own that records its arguments.
func TestDemoPrereqs(t *testing.T) {
	type setup struct {
		root, yarn, npm, npmFails, pg, aptGet bool
	}
	cases := []struct {
		name     string
		s        setup
		wantCode int
		wantLog  []string // calls recorded by the stubs, in order
		wantErr  string   // on standard error
	}{
		{"everything there", setup{yarn: true, npm: true, pg: true, aptGet: true}, 0, nil, ""},
		{"yarn installed through npm", setup{npm: true, pg: true}, 0, []string{"npm i -g yarn@1.22.22"}, "npm i -g yarn@1.22.22"},
		{"npm cannot install globally", setup{npm: true, npmFails: true, pg: true}, 1, []string{"npm i -g yarn@1.22.22"}, "run:  sudo npm i -g yarn@1.22.22"},
		{"no npm", setup{pg: true}, 1, nil, "run:  apt-get install nodejs npm"},
		{"postgres installed by apt as root", setup{root: true, yarn: true, aptGet: true}, 0,
			[]string{"apt-get update", "apt-get install -y --no-install-recommends postgresql"}, "apt-get install postgresql"},
		{"postgres missing, not root", setup{yarn: true, aptGet: true}, 1, nil, "run:  sudo apt-get install -y postgresql"},
		{"postgres missing, root without apt", setup{root: true, yarn: true}, 1, nil, "run:  PG_BIN=/path/to/postgresql/bin make demo"},
		{"both missing, root: both installed", setup{root: true, npm: true, aptGet: true}, 0,
			[]string{"npm i -g yarn@1.22.22", "apt-get update", "apt-get install -y --no-install-recommends postgresql"}, ""},
	}
	script, err := filepath.Abs("demo-prereqs.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			pglib := t.TempDir()
			calls := filepath.Join(t.TempDir(), "calls")
			record := `echo "$(basename "$0") $*" >> ` + calls
			uid := "1000"
			if tc.s.root {
				uid = "0"
			}
			stub(t, bin, "id", `echo `+uid)
			stub(t, bin, "go", `exit 0`)
			for _, tool := range []string{"basename", "dirname"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.s.yarn {
				stub(t, bin, "yarn", `exit 0`)
			}
			if tc.s.npm {
				body := record + "\n"
				if tc.s.npmFails {
					body += "exit 243"
				} else {
					body += `printf '#!/bin/sh\nexit 0\n' > ` + filepath.Join(bin, "yarn") + ` && /bin/chmod +x ` + filepath.Join(bin, "yarn")
				}
				stub(t, bin, "npm", body)
			}
			if tc.s.pg {
				mkPG(t, pglib)
			}
			if tc.s.aptGet {
				stub(t, bin, "apt-get", record+"\n"+`case "$1" in install) /bin/mkdir -p `+pglib+`/16/bin && for f in initdb pg_ctl; do printf '#!/bin/sh\n' > `+pglib+`/16/bin/$f; /bin/chmod +x `+pglib+`/16/bin/$f; done;; esac`)
			}
			cmd := exec.Command("/bin/bash", script)
			cmd.Env = []string{"PATH=" + bin, "RXC_PG_LIB=" + pglib, "HOME=" + t.TempDir()}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Fatalf("stderr %q does not contain %q", stderr.String(), tc.wantErr)
			}
			data, _ := os.ReadFile(calls)
			got := strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(data)), " ", "_"))
			var want []string
			for _, c := range tc.wantLog {
				want = append(want, strings.ReplaceAll(c, " ", "_"))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("calls %q, want %q", got, want)
			}
			if tc.wantCode != 0 && strings.Count(stderr.String(), "run:") != 1 {
				t.Fatalf("a stop names exactly one command to run; stderr:\n%s", stderr.String())
			}
		})
	}
}

func mkPG(t *testing.T, lib string) {
	t.Helper()
	dir := filepath.Join(lib, "15", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"initdb", "pg_ctl"} {
		stub(t, dir, f, "exit 0")
	}
}
