package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startWeb serves the console: a copy of web/dist with config.js written
// by the image's real entrypoint hook, behind Debian's nginx running the
// production configuration (only paths and the port are rewritten, as the
// web system tests do), or behind the Go server in static.go.
func (s *Stack) startWeb(ctx context.Context, st *state, p ports) error {
	mode := s.cfg.Web
	if mode == WebNone {
		return nil
	}
	webDir := absPath(s.cfg.WebDir)
	dist := filepath.Join(webDir, "dist")
	if _, err := os.Stat(filepath.Join(dist, "index.html")); err != nil {
		if mode == WebAuto {
			s.say("web: %s has no build (make -C web build): the console is not served", dist)
			return nil
		}
		return fmt.Errorf("web: %s has no build: run make -C web build first", dist)
	}
	site, err := s.prepareSite(st, webDir, dist, p)
	if err != nil {
		return err
	}
	if mode == WebAuto {
		mode = WebGo
		if nginxPath() != "" {
			mode = WebNginx
		}
	}
	addr := hostPort(s.cfg.WebAddr, p.Web)
	if mode == WebNginx {
		err := s.startNginx(ctx, st, site, addr)
		if err == nil || s.cfg.Web == WebNginx {
			if err == nil {
				s.info.Web, s.info.WebURL = WebNginx, "http://localhost:"+strconv.Itoa(p.Web)
				s.say("web: nginx on %s", s.info.WebURL)
			}
			return err
		}
		s.say("web: nginx did not start (%v); serving the console with the Go server instead", err)
	}
	if err := s.startStatic(site, addr); err != nil {
		return err
	}
	s.info.Web, s.info.WebURL = WebGo, "http://localhost:"+strconv.Itoa(p.Web)
	s.say("web: Go server on %s", s.info.WebURL)
	return nil
}

// site is what both servers serve.
type site struct {
	webDir    string // the repository's web/
	html      string // copy of dist/ without its development config.js
	configDir string // the hook's output: config.js, api-origin.conf, listen.conf
	apiOrigin string
}

func (s *Stack) prepareSite(st *state, webDir, dist string, p ports) (site, error) {
	root := st.path("web")
	si := site{webDir: webDir, html: filepath.Join(root, "html"), configDir: filepath.Join(root, "config"), apiOrigin: s.info.APIBaseURL}
	if err := ensureDir(root, 0o755); err != nil {
		return si, err
	}
	// A fresh copy each start: the build may have changed, and nginx's
	// workers (nobody, when started as root) must be able to read it.
	if err := os.RemoveAll(si.html); err != nil {
		return si, err
	}
	if err := copyTree(dist, si.html); err != nil {
		return si, fmt.Errorf("web: copy %s: %w", dist, err)
	}
	if err := os.Remove(filepath.Join(si.html, "config.js")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return si, err
	}
	if err := ensureDir(si.configDir, 0o755); err != nil {
		return si, err
	}
	hook := exec.Command("sh", filepath.Join(webDir, "docker-entrypoint.d", "40-rxc-config.sh"))
	hook.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"VITE_API_BASE_URL=" + s.info.APIBaseURL + "/api",
		"VITE_ANALYTICS_AI_CHAT_ENABLED=" + strconv.FormatBool(s.cfg.Chat.Enabled),
		"RXC_CONFIG_DIR=" + si.configDir,
		"RXC_LISTEN_PORT=" + strconv.Itoa(p.Web),
		// No IPv6 listener: the stack stays on 127.0.0.1.
		"RXC_IF_INET6=" + filepath.Join(root, "no-ipv6"),
	}
	if out, err := hook.CombinedOutput(); err != nil {
		return si, fmt.Errorf("web: entrypoint hook: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// The hook listens on every address; the stack keeps to loopback.
	listen := filepath.Join(si.configDir, "listen.conf")
	data, err := os.ReadFile(listen)
	if err != nil {
		return si, err
	}
	want := fmt.Sprintf("listen %d;", p.Web)
	if !strings.Contains(string(data), want) {
		return si, fmt.Errorf("web: %s no longer holds %q: update the stack's templating", listen, want)
	}
	loop := fmt.Sprintf("listen %s;", hostPort(s.cfg.WebAddr, p.Web))
	if err := os.WriteFile(listen, []byte(strings.ReplaceAll(string(data), want, loop)), 0o644); err != nil {
		return si, err
	}
	return si, makeReadable(root)
}

func nginxPath() string {
	for _, p := range []string{"/usr/sbin/nginx"} {
		if executable(p) {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	return ""
}

// startNginx runs nginx in the foreground as a child of this process.
func (s *Stack) startNginx(ctx context.Context, st *state, si site, addr string) error {
	bin := nginxPath()
	if bin == "" {
		return errors.New("nginx is not installed (Debian: apt-get install nginx-light)")
	}
	prefix := st.path("web", "nginx")
	confd := filepath.Join(prefix, "conf.d")
	if err := os.RemoveAll(prefix); err != nil {
		return err
	}
	if err := ensureDir(confd, 0o755); err != nil {
		return err
	}
	logDir := st.path("logs")
	mainConf, err := rewrite(filepath.Join(si.webDir, "nginx", "nginx.conf"), [][2]string{
		{"pid /tmp/nginx.pid;", "pid " + prefix + "/nginx.pid;"},
		{"/tmp/nginx-", prefix + "/nginx-"},
		{"error_log stderr", "error_log " + filepath.Join(logDir, "nginx-error.log")},
		{"access_log /dev/stdout", "access_log " + filepath.Join(logDir, "nginx-access.log")},
		{"/etc/nginx/conf.d/*.conf", confd + "/*.conf"},
	})
	if err != nil {
		return err
	}
	serverConf, err := rewrite(filepath.Join(si.webDir, "nginx", "default.conf"), [][2]string{
		{"/tmp/rxc/", si.configDir + "/"},
		{"/usr/share/nginx/html", si.html},
		{"/etc/nginx/snippets/rxc-security-headers.conf", filepath.Join(si.webDir, "nginx", "security-headers.conf")},
	})
	if err != nil {
		return err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, mainConf, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(confd, "default.conf"), serverConf, 0o644); err != nil {
		return err
	}
	args := []string{"-p", prefix + "/", "-c", conf, "-e", filepath.Join(logDir, "nginx-error.log"), "-g", "daemon off;"}
	if out, err := exec.Command(bin, append(args, "-t")...).CombinedOutput(); err != nil {
		return fmt.Errorf("nginx -t: %v: %s", err, strings.TrimSpace(string(out)))
	}
	out, err := os.OpenFile(filepath.Join(logDir, "nginx.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c, err := startChild(bin, args, out, nil)
	out.Close()
	if err != nil {
		return fmt.Errorf("nginx: %w", err)
	}
	s.onStop("nginx", func(ctx context.Context) error { return c.stop(ctx, syscall.SIGQUIT) })
	base := "http://" + addr
	err = waitFor(ctx, 10*time.Second, "nginx /healthz", func() bool {
		return c.running() && httpStatus(base+"/healthz") == http.StatusOK
	})
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, filepath.Join(logDir, "nginx-error.log"))
	}
	// nginx's workers may lack access to the state folder (a parent folder
	// closed to others): the stack must not claim to serve what it cannot.
	for _, p := range []string{"/index.html", "/config.js"} {
		if st := httpStatus(base + p); st != http.StatusOK {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.stop(sctx, syscall.SIGQUIT)
			return fmt.Errorf("nginx answers %s with %d (can its workers read %s?)", p, st, si.html)
		}
	}
	return nil
}

func (s *Stack) startStatic(si site, addr string) error {
	h, err := newStaticSite(si.html, filepath.Join(si.configDir, "config.js"), filepath.Join(si.webDir, "nginx", "security-headers.conf"), si.apiOrigin)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	r := run(func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(lis) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	s.onStop("web server", r.stop)
	return nil
}

// rewrite reads a production config file and replaces each pair, failing
// when a pattern is gone so a config change cannot go unnoticed.
func rewrite(file string, pairs [][2]string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	text := string(data)
	for _, p := range pairs {
		if !strings.Contains(text, p[0]) {
			return nil, fmt.Errorf("web: %s no longer contains %q: update the stack's templating", file, p[0])
		}
		text = strings.ReplaceAll(text, p[0], p[1])
	}
	return []byte(text), nil
}

// copyTree copies the regular files and folders under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// makeReadable opens dir to nginx's workers, whatever the umask was.
func makeReadable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		if d.Type().IsRegular() {
			return os.Chmod(p, 0o644)
		}
		return nil
	})
}
