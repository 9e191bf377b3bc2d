package deploy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	capp "github.com/rxc-project/rxc/apps/controlplane/app"
	papp "github.com/rxc-project/rxc/apps/provisioner/app"
)

// The configuration tables of docs/provisioner.md and docs/controlplane.md are what operators
// read: every variable the services read must be documented there, with its default.
func TestDocsDocumentEveryVariable(t *testing.T) {
	readme := readFile(t, filepath.Join(repoRoot, "docs", "provisioner.md")) + readFile(t, filepath.Join(repoRoot, "docs", "controlplane.md"))
	var missing, wrongDefault []string
	for _, spec := range []any{&papp.ServeConfig{}, &capp.ServeConfig{}} {
		for name, v := range envOf(t, spec) {
			rows := rowsMentioning(readme, name)
			if len(rows) == 0 {
				missing = append(missing, name)
				continue
			}
			if v.Default != "" && !slices.ContainsFunc(rows, func(r string) bool { return mentionsDefault(r, v.Default) }) {
				wrongDefault = append(wrongDefault, name+"="+v.Default)
			}
		}
	}
	slices.Sort(missing)
	slices.Sort(wrongDefault)
	if len(missing) > 0 {
		t.Errorf("docs/provisioner.md and docs/controlplane.md do not document: %s", strings.Join(missing, ", "))
	}
	if len(wrongDefault) > 0 {
		t.Errorf("the docs' rows for these variables do not show their default: %s", strings.Join(wrongDefault, ", "))
	}
}

// rowsMentioning returns the docs lines naming the variable, either in
// full or as a `_SUFFIX` continuation of a grouped row (`_MAX_MEMORY`).
func rowsMentioning(readme, name string) []string {
	var rows []string
	for line := range strings.Lines(readme) {
		if strings.Contains(line, "`"+name+"`") {
			rows = append(rows, line)
			continue
		}
		for i := strings.Index(name, "_"); i > 0; i = nextUnderscore(name, i) {
			if strings.Contains(line, "`"+name[i:]+"`") && strings.Contains(line, "`"+prefixOf(name, i)) {
				rows = append(rows, line)
				break
			}
		}
	}
	return rows
}

func nextUnderscore(s string, i int) int {
	j := strings.Index(s[i+1:], "_")
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// prefixOf is the start of name before its i-th byte, used to tie a
// `_SUFFIX` to the group named earlier on the same row.
func prefixOf(name string, i int) string {
	p := name[:i]
	if k := strings.Index(p, "_"); k > 0 {
		return p[:k]
	}
	return p
}

// mentionsDefault reports whether the row shows the default as the code
// spells it (`168h`, `true`, `:8080`, `10737418240`).
func mentionsDefault(row, def string) bool { return strings.Contains(row, def) }
