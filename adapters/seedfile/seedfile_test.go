package seedfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/adapters/seedfile"
)

func TestReadRefusesLooseOrMissingFiles(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.nk")
	if err := os.WriteFile(ok, []byte("SOSEED\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose.nk")
	if err := os.WriteFile(loose, []byte("SOSEED\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := seedfile.Read(ok)
	if err != nil || string(got) != "SOSEED" {
		t.Errorf("Read(0600 file) = %q, %v; want the trimmed seed", got, err)
	}
	for _, c := range []struct{ path, want string }{
		{loose, "has mode 0640"},
		{filepath.Join(dir, "missing.nk"), "does not exist: run provisioner init-operator first"},
		{dir, "is not a regular file"},
	} {
		if _, err := seedfile.Read(c.path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read(%s) = %v, want an error containing %q", c.path, err, c.want)
		}
	}
}

// A staged seed is private, beside its target (in a folder created 0700),
// and placing it never replaces a file.
func TestStageAndPlace(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "keys", "operator.nk")
	var files seedfile.Files
	staged, err := files.StageSeed(target, []byte("SOSEED"))
	if err != nil {
		t.Fatal(err)
	}
	defer files.Discard(staged)
	if filepath.Dir(staged) != filepath.Dir(target) {
		t.Errorf("staged at %s, want beside %s", staged, target)
	}
	for path, want := range map[string]os.FileMode{staged: 0o600, filepath.Dir(target): 0o700} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s mode %04o, want %04o", path, got, want)
		}
	}
	if exists, err := files.Exists(target); exists || err != nil {
		t.Errorf("Exists before placing = %v, %v", exists, err)
	}
	if err := files.PlaceSeed(staged, target); err != nil {
		t.Fatal(err)
	}
	if got, err := files.ReadSeed(target); err != nil || string(got) != "SOSEED" {
		t.Errorf("ReadSeed after placing = %q, %v", got, err)
	}
	other, err := files.StageSeed(target, []byte("SOOTHER"))
	if err != nil {
		t.Fatal(err)
	}
	defer files.Discard(other)
	if err := files.PlaceSeed(other, target); !errors.Is(err, os.ErrExist) {
		t.Errorf("placing over an existing seed: %v, want os.ErrExist", err)
	}
	if got, _ := files.ReadSeed(target); string(got) != "SOSEED" {
		t.Errorf("seed replaced: %q", got)
	}
}

// A dangling symbolic link is something at the path: init-operator must
// not create a seed through it.
func TestExistsCountsDanglingLinks(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "operator.nk")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), link); err != nil {
		t.Skip("symbolic links unavailable:", err)
	}
	if exists, err := (seedfile.Files{}).Exists(link); !exists || err != nil {
		t.Errorf("Exists(dangling link) = %v, %v; want true", exists, err)
	}
}

func TestWriteConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operator.conf")
	var files seedfile.Files
	for _, content := range []string{"first\n", "second\n"} {
		if err := files.WriteConfig(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("config = %q, %v; want %q", got, err, content)
		}
	}
}
