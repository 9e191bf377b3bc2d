package archtest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// executableMagic are the first bytes of ELF, Mach-O (both byte orders, 32
// and 64 bit, universal) and PE/COFF executables.
var executableMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	{'M', 'Z'},
}

// isExecutable reports whether head starts like a compiled executable.
func isExecutable(head []byte) bool {
	for _, m := range executableMagic {
		if bytes.HasPrefix(head, m) {
			return true
		}
	}
	return false
}

// TestNoTrackedBinaries keeps build outputs out of the repository (a 19 MB
// binary once sat at its root): binaries are built by make, never committed.
func TestNoTrackedBinaries(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files listed %d files; the check would pass vacuously", len(files))
	}
	for _, f := range files {
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(fh, head)
		fh.Close()
		if isExecutable(head[:n]) {
			t.Errorf("%s is a compiled executable: build outputs do not belong in git", f)
		}
	}
}

func TestIsExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(fh, head); err != nil {
		t.Fatal(err)
	}
	if !isExecutable(head) {
		t.Errorf("the test binary itself (%x…) is not recognised as an executable", head)
	}
	for _, text := range []string{"package", "#!/bin", "{\n  ", "\x89PNG"} {
		if isExecutable([]byte(text)) {
			t.Errorf("%q recognised as an executable", text)
		}
	}
}
