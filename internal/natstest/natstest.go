// Package natstest runs a nats-server for integration tests from a
// configuration file, the way it runs in production: in-process
// (github.com/nats-io/nats-server/v2, the version go.mod pins, through
// adapters/nats/embedded) or, when the environment variable
// RXC_NATS_SERVER_BIN names a nats-server binary, as that external process.
// The second lets `make test-nats-compat` run the NATS-facing tests against
// the oldest supported release. Either way the server keeps its port and
// JetStream store across Stop and Start, and exposes its monitoring
// endpoint for inspection.
//
// It is the one place tests (and the benchmarks) get a nats-server, in the
// spirit of nats-server's own test/test.go: Options for the port, name and
// extra configuration, Operator for operator mode (a URL resolver or a
// preloaded memory resolver), a JetStream store under Dir, and Stop, Start
// and Kill for restarts.
package natstest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/adapters/nats/embedded"
)

// BinEnv names the environment variable that selects an external binary.
const BinEnv = "RXC_NATS_SERVER_BIN"

// TB is the part of testing.TB the helper needs.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// Options describe a server.
type Options struct {
	// Dir holds the configuration file, the JetStream store (Dir/jetstream)
	// and an external server's log. Required.
	Dir string
	// Name is the server_name; defaults to "rxc-test".
	Name string
	// Port is the client port; 0 picks a free one.
	Port int
	// Operator, when set, runs the server in operator mode.
	Operator *Operator
	// Config is appended to the generated configuration (listen, monitoring
	// port, server_name, jetstream store, operator): an include of a
	// provisioner's operator fragment, cluster blocks, feature flags and so
	// on. It may include files from Dir by relative name.
	Config string
	// Bin is the external nats-server binary to run; empty:
	// $RXC_NATS_SERVER_BIN, and in-process when that is empty too.
	Bin string
	// InProcess runs the server in this process even when
	// RXC_NATS_SERVER_BIN is set (a measurement or check that is about the
	// pinned version).
	InProcess bool
	// ReadyTimeout bounds Start; defaults to 30s.
	ReadyTimeout time.Duration
	// Profiling opens nats-server's profiling port (prof_port, Go's
	// /debug/pprof/) on a free loopback port: see ProfileURL.
	Profiling bool
}

// Operator is the trust configuration of a server in operator mode: users
// authenticate with JWTs of accounts signed by the operator.
type Operator struct {
	// JWT is the operator's JWT.
	JWT string
	// SystemAccount is the system account's public key.
	SystemAccount string
	// ResolverURL is the base URL the server fetches account JWTs from
	// (resolver: URL(...)), as in production. Empty: a memory resolver
	// holding Preload.
	ResolverURL string
	// Preload maps account public keys to account JWTs for the memory
	// resolver.
	Preload map[string]string
}

// config renders the operator block.
func (o *Operator) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operator: %q\nsystem_account: %q\n", o.JWT, o.SystemAccount)
	if o.ResolverURL != "" {
		fmt.Fprintf(&b, "resolver: URL(%q)\n", o.ResolverURL)
		return b.String()
	}
	b.WriteString("resolver: MEMORY\nresolver_preload: {\n")
	keys := make([]string, 0, len(o.Preload))
	for k := range o.Preload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %q\n", k, o.Preload[k])
	}
	b.WriteString("}\n")
	return b.String()
}

// Server is one nats-server, stopped or running.
type Server struct {
	t           TB
	opts        Options
	monitorPort int
	profPort    int // 0: no profiling port
	bin         string

	mu   sync.Mutex
	ns   *server.Server // in-process, while running
	cmd  *exec.Cmd      // external, while running
	exit chan error     // external: the process's exit
}

// External reports whether servers run as an external binary by default.
func External() bool { return os.Getenv(BinEnv) != "" }

// New prepares a server without starting it.
func New(t TB, opts Options) *Server {
	t.Helper()
	if opts.Dir == "" {
		t.Fatalf("natstest: Options.Dir is required")
	}
	if opts.Name == "" {
		opts.Name = "rxc-test"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.Port == 0 {
		opts.Port = freePort(t)
	}
	bin := opts.Bin
	if bin == "" {
		bin = os.Getenv(BinEnv)
	}
	if opts.InProcess {
		bin = ""
	}
	s := &Server{t: t, opts: opts, monitorPort: freePort(t), bin: bin}
	if opts.Profiling {
		s.profPort = freePort(t)
	}
	t.Cleanup(s.Stop)
	return s
}

// Start creates and starts a server, failing the test when it is not ready.
func Start(t TB, opts Options) *Server {
	t.Helper()
	s := New(t, opts)
	s.Start()
	return s
}

func freePort(t TB) int {
	t.Helper()
	p, err := loopback.FreePort()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return p
}

// URL is the client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port) }

// Port is the client port.
func (s *Server) Port() int { return s.opts.Port }

// MonitorURL is the base URL of the monitoring endpoint.
func (s *Server) MonitorURL() string { return fmt.Sprintf("http://127.0.0.1:%d", s.monitorPort) }

// ProfileURL is the base URL of the profiling endpoint (append
// /debug/pprof/...), "" without Options.Profiling.
func (s *Server) ProfileURL() string {
	if s.profPort == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", s.profPort)
}

// PID is the external process's id while it runs, 0 otherwise (and for a
// server in this process).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// ConfigPath is the configuration file the server runs with.
func (s *Server) ConfigPath() string { return filepath.Join(s.opts.Dir, s.opts.Name+".conf") }

// StoreDir is the JetStream store.
func (s *Server) StoreDir() string { return filepath.Join(s.opts.Dir, "jetstream-"+s.opts.Name) }

// External reports whether this server runs as an external process.
func (s *Server) External() bool { return s.bin != "" }

func (s *Server) writeConfig() error {
	body := fmt.Sprintf("listen: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\nserver_name: %q\njetstream {\n  store_dir: %q\n}\n",
		s.opts.Port, s.monitorPort, s.opts.Name, s.StoreDir())
	if s.profPort != 0 {
		body += fmt.Sprintf("prof_port: %d\n", s.profPort)
	}
	if s.opts.Operator != nil {
		body += s.opts.Operator.config()
	}
	body += s.opts.Config + "\n"
	return os.WriteFile(s.ConfigPath(), []byte(body), 0o600)
}

// Start (re)starts the stopped server on the same port and store and waits
// until it is healthy (JetStream included).
func (s *Server) Start() {
	s.t.Helper()
	if err := s.TryStart(); err != nil {
		s.t.Fatalf("natstest: %v", err)
	}
}

// TryStart is Start returning the error, for tests where the server is
// expected to refuse to start (an unreachable resolver, say).
func (s *Server) TryStart() error {
	s.mu.Lock()
	running := s.ns != nil || s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("nats-server already running")
	}
	if err := s.writeConfig(); err != nil {
		return err
	}
	if s.bin != "" {
		return s.startExternal()
	}
	return s.startInProcess()
}

func (s *Server) startInProcess() error {
	ns, err := embedded.Start(s.ConfigPath(), embedded.Options{ReadyTimeout: s.opts.ReadyTimeout})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.ns = ns
	s.mu.Unlock()
	return s.waitHealthy(nil)
}

func (s *Server) logPath() string { return filepath.Join(s.opts.Dir, s.opts.Name+".log") }

func (s *Server) startExternal() error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "-c", s.ConfigPath())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exit := make(chan error, 1)
	go func() {
		exit <- cmd.Wait()
		logf.Close()
	}()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()
	if err := s.waitHealthy(exit); err != nil {
		s.Stop()
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return nil
}

// waitHealthy polls /healthz until the server, JetStream included, is ready.
func (s *Server) waitHealthy(exit chan error) error {
	deadline := time.Now().Add(s.opts.ReadyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(s.MonitorURL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exit:
			exit <- err
			return fmt.Errorf("nats-server exited during start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server not healthy within %s", s.opts.ReadyTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running reports whether the server runs (an external process may have
// exited on its own).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ns != nil {
		return s.ns.Running()
	}
	if s.cmd == nil {
		return false
	}
	select {
	case err := <-s.exit:
		s.exit <- err
		return false
	default:
		return true
	}
}

// Stop shuts the server down gracefully and waits for it; safe to call when
// stopped.
func (s *Server) Stop() { s.stop(syscall.SIGTERM) }

// Kill ends the server at once: an external process gets SIGKILL, an
// in-process one is shut down (it cannot be killed harder).
func (s *Server) Kill() { s.stop(syscall.SIGKILL) }

func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	ns, cmd, exit := s.ns, s.cmd, s.exit
	s.ns, s.cmd, s.exit = nil, nil, nil
	s.mu.Unlock()
	if ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
		select {
		case <-exit:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exit
		}
		if f, ok := s.t.(interface{ Failed() bool }); ok && f.Failed() {
			s.t.Logf("nats-server %s log:\n%s", s.opts.Name, s.logTail())
		}
	}
}

// StopWithin sends the external process sig (SIGTERM: a plain stop;
// SIGUSR2: lame-duck mode, as `nats-server --signal ldm`) and waits up to
// limit for it to exit on its own, as a supervisor with that grace period
// would; past it the process is killed. It returns how long the process
// took and whether it exited within limit (bench/stop times the shipped
// grace periods with it). In-process servers cannot be signalled.
func (s *Server) StopWithin(sig syscall.Signal, limit time.Duration) (time.Duration, bool, error) {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	if cmd == nil {
		s.mu.Unlock()
		return 0, false, errors.New("natstest: no external nats-server process to signal")
	}
	s.cmd, s.exit = nil, nil
	s.mu.Unlock()
	start := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		_ = cmd.Process.Kill()
		<-exit
		return 0, false, err
	}
	select {
	case <-exit:
		return time.Since(start), true, nil
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-exit
		return time.Since(start), false, nil
	}
}

// Pause stops the external process with SIGSTOP (a hung server); Resume
// continues it. In-process servers cannot be paused: the test is skipped
// by the caller (see External).
func (s *Server) Pause() error  { return s.signal(syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("natstest: no external nats-server process to signal")
	}
	return cmd.Process.Signal(sig)
}

// Version is the running server's version, from its monitoring endpoint.
func (s *Server) Version() (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := s.Monitor("/varz", &v); err != nil {
		return "", err
	}
	return v.Version, nil
}

// Monitor GETs a monitoring path (such as "/jsz?acc=X&streams=true") and
// decodes its JSON into v.
func (s *Server) Monitor(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.MonitorURL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return json.Unmarshal(body, v)
}

// AccountStreams returns the streams of an account with their
// configuration and state, from /jsz.
func (s *Server) AccountStreams(account string) ([]server.StreamDetail, error) {
	var jsz server.JSInfo
	if err := s.Monitor("/jsz?acc="+account+"&streams=true&config=true", &jsz); err != nil {
		return nil, err
	}
	var out []server.StreamDetail
	for _, a := range jsz.AccountDetails {
		if a.Id == account || a.Name == account {
			out = append(out, a.Streams...)
		}
	}
	return out, nil
}

// logTail is the end of an external server's log.
func (s *Server) logTail() string {
	f, err := os.Open(s.logPath())
	if err != nil {
		return "(no log)"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 60 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Reachable reports whether something accepts connections on the client
// port.
func (s *Server) Reachable() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.opts.Port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
