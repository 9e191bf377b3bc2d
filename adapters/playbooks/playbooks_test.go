package playbooks_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rxc-project/rxc/adapters/playbooks"
	"github.com/rxc-project/rxc/core/analytics"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestMatchAndTitles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "log4shell.md", "---\ntitle: \"Log4Shell response\"\nowner: soc\n---\n# Ignored heading\nPatch CVE-2021-44228 first.\n")
	write(t, dir, "scan.md", "Intro line\n\n## Scanner triage\nBlock 198.51.100.7 and anything matching ET SCAN Nmap.\n")
	write(t, dir, "untitled.md", "mentions 10.0.0.10 only\n")
	write(t, dir, "notes.txt", "CVE-2021-44228 in a text file is not a playbook\n")

	lib, err := playbooks.New(playbooks.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !lib.Available(context.Background()) {
		t.Fatal("a folder with Markdown files is not available")
	}
	got, err := lib.Match(context.Background(), []string{"cve-2021-44228", "10.0.0.1", "et scan nmap"})
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.Playbook{
		{Name: "log4shell.md", Title: "Log4Shell response", Matched: "cve-2021-44228"},
		{Name: "scan.md", Title: "Scanner triage", Matched: "et scan nmap"},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(analytics.Playbook{}, "Excerpt")); diff != "" {
		t.Errorf("matches (-want +got):\n%s", diff)
	}
	got, _ = lib.Match(context.Background(), []string{"10.0.0.10"})
	if len(got) != 1 || got[0].Title != "untitled" {
		t.Errorf("file name as title: %+v", got)
	}
	if got, _ := lib.Match(context.Background(), []string{"203.0.113.9"}); len(got) != 0 {
		t.Errorf("unmentioned term matched: %+v", got)
	}
}

func TestAvailability(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, dir, "readme.txt", "no playbooks here")
	lib, err := playbooks.New(playbooks.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if lib.Available(context.Background()) {
		t.Error("a folder without Markdown files is available")
	}
	if _, err := playbooks.New(playbooks.Config{Dir: filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing folder was accepted")
	}
}
