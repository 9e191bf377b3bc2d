package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// outsideDocs are names of documents that live outside the repository (an
// earlier design document and its sources). The project's own description
// is docs/architecture.md; nothing may point elsewhere.
var outsideDocs = regexp.MustCompile(`\bDESIGN\.md\b|\bSTYLE\.md\b|\.\./shared/|\bseeds/[0-9]{3}_`)

// mdLink matches the target of a Markdown link or image.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// trackedFiles lists the repository's tracked files relative to its root.
func trackedFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	root = strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files = strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files listed %d files; the check would pass vacuously", len(files))
	}
	return root, files
}

// outsideRefs returns the places in text that name a document outside the
// repository, or link to a relative path that leaves root or does not exist.
func outsideRefs(root, name, text string) []string {
	var bad []string
	for i, line := range strings.Split(text, "\n") {
		if m := outsideDocs.FindString(line); m != "" {
			bad = append(bad, name+":"+strconv.Itoa(i+1)+": names "+m+", a document outside the repository")
		}
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Clean(filepath.Join(root, filepath.Dir(name), target))
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				bad = append(bad, name+":"+strconv.Itoa(i+1)+": links "+m[1]+", outside the repository")
			} else if _, err := os.Stat(p); err != nil {
				bad = append(bad, name+":"+strconv.Itoa(i+1)+": links "+m[1]+", which does not exist")
			}
		}
	}
	return bad
}

// TestNoReferenceOutsideRepository keeps every reference inside the
// repository: a reader cannot follow a pointer to a document they do not
// have.
func TestNoReferenceOutsideRepository(t *testing.T) {
	root, files := trackedFiles(t)
	self := filepath.Join("internal", "archtest", "docrefs_test.go")
	for _, f := range files {
		if f == self || strings.HasPrefix(f, "web/node_modules/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || isBinary(data) {
			continue
		}
		for _, b := range outsideRefs(root, f, string(data)) {
			t.Error(b)
		}
	}
}

func isBinary(data []byte) bool {
	head := data[:min(len(data), 8000)]
	return strings.IndexByte(string(head), 0) >= 0
}

func TestOutsideRefsFindsThem(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, text string
		want             int
	}{
		{"design doc in Go", "x.go", "// as DESIGN.md says", 1},
		{"seed file", "x.go", "// see ../shared/seeds/000_abc.txt", 1},
		{"link inside", "README.md", "see [a](docs/a.md#top) and [web](https://example.org)", 0},
		{"link missing", "README.md", "see [b](docs/b.md)", 1},
		{"link outside", "docs/a.md", "see [c](../../elsewhere.md)", 1},
		{"plain words", "README.md", "the design of the system", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := outsideRefs(root, tc.file, tc.text); len(got) != tc.want {
				t.Errorf("outsideRefs(%q) = %q, want %d finding(s)", tc.text, got, tc.want)
			}
		})
	}
}
