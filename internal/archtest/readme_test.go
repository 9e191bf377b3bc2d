package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeLimit is how long the README may grow: an introduction for a newcomer (what RXC is, the
// two commands, what they show, a folder map, links). Reference material lives in docs/.
const readmeLimit = 200

// referenceInREADME finds what belongs in docs/ rather than in the README: configuration tables
// (a row naming an environment variable), the problem-code table (a row of code and status), and
// the headings of the reference documents.
func referenceInREADME(text string) []string {
	var found []string
	variableRow := regexp.MustCompile("^\\| `[A-Z][A-Z0-9]*(_[A-Z0-9]+)+` \\|")
	problemRow := regexp.MustCompile("^\\| `[a-z]+(_[a-z]+)*` \\| [1-5][0-9]{2} \\|")
	heading := regexp.MustCompile(`^#{2,6} .*\b(Configuration|Problem codes|HTTP API|Isolation model|NATS topology|Fleet scale|Renewal|Outages)\b`)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		switch {
		case variableRow.MatchString(l):
			found = append(found, "line "+itoa(i+1)+": a configuration row (docs/provisioner.md, docs/controlplane.md)")
		case problemRow.MatchString(l):
			found = append(found, "line "+itoa(i+1)+": a problem-code row (docs/problem-codes.md)")
		case heading.MatchString(l):
			found = append(found, "line "+itoa(i+1)+": the reference section "+strings.TrimLeft(l, "# "))
		}
	}
	if len(lines) > readmeLimit {
		found = append(found, "it has "+itoa(len(lines))+" lines, over "+itoa(readmeLimit))
	}
	return found
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestREADMEStaysAnIntroduction fails when reference material grows back into the README.
func TestREADMEStaysAnIntroduction(t *testing.T) {
	root, _ := trackedFiles(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range referenceInREADME(string(data)) {
		t.Errorf("README.md: %s", f)
	}
}

// TestReferenceInREADMEFindsThem proves the check can fail on each kind of reference material.
func TestReferenceInREADMEFindsThem(t *testing.T) {
	for name, text := range map[string]string{
		"variable row":  "| `PG_DSN` | required | PostgreSQL |",
		"problem row":   "| `invalid_id` | 400 | ids must match |",
		"heading":       "### Configuration (`controlplane serve`)",
		"too long":      strings.Repeat("line\n", readmeLimit+1),
		"problem codes": "## Problem codes",
	} {
		if len(referenceInREADME(text)) == 0 {
			t.Errorf("%s: not found in %q", name, text[:min(len(text), 40)])
		}
	}
	if got := referenceInREADME("# RXC\n\nSee [docs](docs/provisioner.md) for `PG_DSN`.\n"); len(got) > 0 {
		t.Errorf("an introduction was flagged: %v", got)
	}
}
