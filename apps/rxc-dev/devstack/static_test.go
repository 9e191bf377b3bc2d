package devstack

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Go server stands in for nginx on machines without it: it must give
// the same answers web/test/system/nginx.test.ts expects from nginx.
func TestStaticSiteMimicsNginx(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	html := filepath.Join(dir, "html")
	for name, body := range map[string]string{
		"index.html":         "<!doctype html><title>RXC</title>",
		"favicon.svg":        "<svg/>",
		"assets/app-1a2b.js": "console.log(1)",
	} {
		p := filepath.Join(html, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	configJS := filepath.Join(dir, "config.js")
	if err := os.WriteFile(configJS, []byte(`window.__APP_CONFIG__ = {"apiBaseUrl":"http://localhost:5009","analyticsAiChatEnabled":false};`), 0o644); err != nil {
		t.Fatal(err)
	}
	site, err := newStaticSite(html, configJS, filepath.Join("..", "..", "..", "web", "nginx", "security-headers.conf"), "http://localhost:5009")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, method, path string
		wantStatus         int
		wantCache          string
		wantBody           string
	}{
		{"spa root", "GET", "/", 200, "no-cache", "<title>RXC</title>"},
		{"deep link falls back to the SPA", "GET", "/sensors/s-1", 200, "no-cache", "<title>RXC</title>"},
		{"index.html is served, not redirected", "GET", "/index.html", 200, "no-cache", "<title>RXC</title>"},
		{"other file", "GET", "/favicon.svg", 200, "no-cache", "<svg/>"},
		{"config.js never cached", "GET", "/config.js", 200, "no-store", "__APP_CONFIG__"},
		{"hashed asset cached for a year", "GET", "/assets/app-1a2b.js", 200, "public, max-age=31536000, immutable", "console.log(1)"},
		{"missing asset is a 404, never the SPA", "GET", "/assets/gone-9z.js", 404, "", "not found"},
		{"the assets folder itself is no file", "GET", "/assets/", 404, "", "not found"},
		{"dot-dot stays inside the root", "GET", "/../../etc/passwd", 200, "no-cache", "<title>RXC</title>"},
		{"healthz", "GET", "/healthz", 200, "", "ok"},
		{"writes refused", "POST", "/", 405, "", "method not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tc.method, "http://localhost:8000/", nil)
			req.URL.Path = tc.path
			rec := httptest.NewRecorder()
			site.ServeHTTP(rec, req)
			res := rec.Result()
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.wantStatus)
			}
			if got := res.Header.Get("Cache-Control"); got != tc.wantCache {
				t.Errorf("Cache-Control %q, want %q", got, tc.wantCache)
			}
			if body := rec.Body.String(); !strings.Contains(strings.ToLower(body), strings.ToLower(tc.wantBody)) {
				t.Errorf("body %q, want it to contain %q", body, tc.wantBody)
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "connect-src 'self' http://localhost:5009;") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy %q lacks the API origin or frame-ancestors", csp)
			}
			for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "X-XSS-Protection": "0", "Referrer-Policy": "strict-origin-when-cross-origin"} {
				if got := res.Header.Get(h); got != want {
					t.Errorf("%s %q, want %q", h, got, want)
				}
			}
		})
	}
}

func TestStaticSiteNeedsTheHeadersFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "headers.conf")
	if err := os.WriteFile(empty, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newStaticSite(dir, filepath.Join(dir, "config.js"), empty, "http://localhost:5009"); err == nil {
		t.Fatal("a headers file without add_header lines was accepted")
	}
}

func TestNewRefusesBadConfigs(t *testing.T) {
	t.Parallel()
	ok := Config{StateDir: t.TempDir(), Web: WebNone}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no state folder", func(c *Config) { c.StateDir = "" }, "state folder"},
		{"API on every interface", func(c *Config) { c.APIAddr = ":5009" }, "loopback"},
		{"NATS on a public address", func(c *Config) { c.NATSAddr = "192.0.2.1:4222" }, "loopback"},
		{"unknown web mode", func(c *Config) { c.Web = "apache" }, "web mode"},
		{"console without a web folder", func(c *Config) { c.Web = WebGo }, "web folder"},
		{"sensors without a tenant", func(c *Config) { c.Sensors = 2 }, "tenant"},
		{"negative sensors", func(c *Config) { c.Sensors = -1 }, "negative"},
		{"PostgreSQL port out of range", func(c *Config) { c.PGPort = 70000 }, "out of range"},
		{"unknown log level", func(c *Config) { c.LogLevel = "loud" }, "log level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := ok
			tc.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error about %q", err, tc.want)
			}
		})
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("New with a good config: %v", err)
	}
}
