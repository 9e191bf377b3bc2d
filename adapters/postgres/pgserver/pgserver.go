// Package pgserver locates the PostgreSQL server programs (initdb, pg_ctl)
// on this machine. The test harness's throwaway clusters and the local
// development stack's long-lived one both find them here, so both agree on
// which PostgreSQL runs. It does not link the testing package, so binaries
// may use it.
package pgserver

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// Binaries returns the folder holding initdb and pg_ctl: PG_BIN, then
// Debian's versioned folders (newest first), then PATH.
func Binaries() (string, error) {
	var candidates []string
	if d := os.Getenv("PG_BIN"); d != "" {
		candidates = append(candidates, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	candidates = append(candidates, dirs...)
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found: install them (Debian: apt-get install postgresql), set PG_BIN to their folder, or set PG_DSN to an existing server")
}

// version is the major version a Debian folder /usr/lib/postgresql/N/bin names.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}
