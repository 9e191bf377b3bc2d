// Package playbooks serves the team's response playbooks: Markdown files
// in one folder. A playbook's title is the `title:` of its front matter,
// else its first heading, else its file name; it matches a question when
// an indicator, CVE id or signature name appears in its text. The folder
// is read on each lookup, so edited playbooks count at once. It implements
// analytics.PlaybookLibrary.
package playbooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rxc-project/rxc/core/analytics"
)

// Bounds on what is read.
const (
	maxFiles     = 500
	maxFileBytes = 256 << 10
	excerptBytes = 1500
)

// Config wires a Library.
type Config struct {
	Dir string
}

// Library is a folder of Markdown playbooks.
type Library struct {
	dir string
}

var _ analytics.PlaybookLibrary = (*Library)(nil)

// New returns a Library on cfg.Dir, which must be a readable folder.
func New(cfg Config) (*Library, error) {
	if cfg.Dir == "" {
		return nil, errors.New("playbooks: folder is required")
	}
	st, err := os.Stat(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("playbooks: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("playbooks: %s is not a folder", cfg.Dir)
	}
	return &Library{dir: cfg.Dir}, nil
}

// Available reports whether the folder holds a Markdown file.
func (l *Library) Available(context.Context) bool {
	names, err := l.files()
	return err == nil && len(names) > 0
}

// Match returns the playbooks mentioning any term, in file name order,
// each with the first term it mentions.
func (l *Library) Match(ctx context.Context, terms []string) ([]analytics.Playbook, error) {
	names, err := l.files()
	if err != nil {
		return nil, err
	}
	var out []analytics.Playbook
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		text, err := readBounded(filepath.Join(l.dir, name))
		if err != nil {
			continue // an unreadable file is not the operator's problem
		}
		lower := strings.ToLower(text)
		for _, term := range terms {
			if term = strings.TrimSpace(term); term == "" || !mentions(lower, strings.ToLower(term)) {
				continue
			}
			out = append(out, analytics.Playbook{Name: name, Title: title(text, name), Matched: term, Excerpt: excerpt(text)})
			break
		}
	}
	return out, nil
}

// files lists the Markdown files of the folder (not its subfolders).
func (l *Library) files() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("playbooks: %w", err)
	}
	var names []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if (ext != ".md" && ext != ".markdown") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
			names = append(names, e.Name())
		}
		if len(names) == maxFiles {
			break
		}
	}
	sort.Strings(names)
	return names, nil
}

func readBounded(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	buf := make([]byte, min(st.Size(), maxFileBytes))
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", err
	}
	return string(buf[:n]), nil
}

// mentions reports whether term occurs in text as a whole token: the
// characters around it are not letters, digits or underscores, so
// 10.0.0.1 does not match inside 10.0.0.10 (text and term in lower case).
func mentions(text, term string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], term)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(term)
		if (start == 0 || !wordByte(text[start-1])) && (end == len(text) || !wordByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// title takes the front matter's title, else the first heading.
func title(text, name string) string {
	body := text
	if rest, ok := strings.CutPrefix(text, "---\n"); ok {
		if fm, after, ok := strings.Cut(rest, "\n---"); ok {
			body = after
			for _, line := range strings.Split(fm, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "title:"); ok {
					if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
						return v
					}
				}
			}
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "#") {
			if h := strings.TrimSpace(strings.TrimLeft(line, "#")); h != "" {
				return h
			}
		}
	}
	return strings.TrimSuffix(name, filepath.Ext(name))
}

func excerpt(text string) string {
	if len(text) <= excerptBytes {
		return text
	}
	return text[:excerptBytes] + "…"
}
