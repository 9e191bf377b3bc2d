package devstack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
)

// staticSite serves the console like web/nginx/default.conf does, for
// machines without nginx: the security headers of security-headers.conf on
// every response, /healthz, /config.js never cached, content-hashed
// /assets/ cached for a year and 404 when missing, other files and the SPA
// fallback (/index.html for any unknown path) revalidated. Unlike nginx it
// does not gzip.
type staticSite struct {
	root     fs.FS
	configJS string
	headers  [][2]string
}

var addHeader = regexp.MustCompile(`^\s*add_header\s+(\S+)\s+"([^"]*)"\s+always;`)

// newStaticSite serves html, with configJS at /config.js and the headers
// read from nginx's security headers file ($rxc_api_origin becomes
// apiOrigin, as the hook's map does for nginx).
func newStaticSite(html, configJS, securityHeaders, apiOrigin string) (*staticSite, error) {
	f, err := os.Open(securityHeaders)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	defer f.Close()
	s := &staticSite{root: os.DirFS(html), configJS: configJS}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		if m := addHeader.FindStringSubmatch(sc.Text()); m != nil {
			s.headers = append(s.headers, [2]string{m[1], strings.ReplaceAll(m[2], "$rxc_api_origin", apiOrigin)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("web: %s: %w", securityHeaders, err)
	}
	if len(s.headers) == 0 {
		return nil, fmt.Errorf("web: %s has no add_header lines this server understands", securityHeaders)
	}
	return s, nil
}

func (s *staticSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	for _, kv := range s.headers {
		h.Set(kv[0], kv[1])
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	switch {
	case p == "/healthz":
		h.Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	case p == "/config.js":
		h.Set("Content-Type", "application/javascript")
		h.Set("Cache-Control", "no-store")
		s.serve(w, r, os.DirFS(path.Dir(s.configJS)), path.Base(s.configJS))
	case strings.HasPrefix(p+"/", "/assets/"):
		name := strings.TrimPrefix(p, "/")
		if !s.isFile(name) {
			http.NotFound(w, r)
			return
		}
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
		s.serve(w, r, s.root, name)
	default:
		name := strings.TrimPrefix(p, "/")
		if name == "" || !s.isFile(name) {
			name = "index.html"
		}
		h.Set("Cache-Control", "no-cache")
		s.serve(w, r, s.root, name)
	}
}

func (s *staticSite) isFile(name string) bool {
	if !fs.ValidPath(name) {
		return false
	}
	info, err := fs.Stat(s.root, name)
	return err == nil && info.Mode().IsRegular()
}

// serve writes one file with http.ServeContent (type, ranges, conditional
// requests) and without ServeFile's redirect of paths ending in index.html.
func (s *staticSite) serve(w http.ResponseWriter, r *http.Request, fsys fs.FS, name string) {
	f, err := fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.Header().Del("Cache-Control")
			http.NotFound(w, r)
			return
		}
		w.Header().Del("Cache-Control")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	rs, ok := f.(io.ReadSeeker)
	if err != nil || !ok || !info.Mode().IsRegular() {
		w.Header().Del("Cache-Control")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	http.ServeContent(w, r, name, info.ModTime(), rs)
}
