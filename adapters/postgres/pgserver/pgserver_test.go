package pgserver

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBinariesHonoursPGBin(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"initdb", "pg_ctl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PG_BIN", dir)
	got, err := Binaries()
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Errorf("Binaries() = %q, want PG_BIN %q", got, dir)
	}
}

func TestBinariesSkipsFolderWithoutPrograms(t *testing.T) {
	dir := t.TempDir()
	// initdb present but not executable, pg_ctl missing: not a server folder.
	if err := os.WriteFile(filepath.Join(dir, "initdb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PG_BIN", dir)
	got, err := Binaries()
	if err == nil && got == dir {
		t.Errorf("Binaries() = %q, a folder without executable initdb and pg_ctl", got)
	}
}

func TestVersionOrdersDebianFolders(t *testing.T) {
	if got, want := version("/usr/lib/postgresql/17/bin"), 17; got != want {
		t.Errorf("version = %d, want %d", got, want)
	}
	if got := version("/opt/pg/bin"); got != 0 {
		t.Errorf("version of an unversioned folder = %d, want 0", got)
	}
}
