// Package controlplanetest runs the real control plane in-process for
// integration tests and load drivers, wired to a running provisioner and
// nats-server from provisionertest: a sensor CA in a temporary folder, a
// fresh database, a bootstrap operator, and an HTTP client that keeps the
// operator's session cookie.
package controlplanetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// The bootstrap operator every plane starts with.
const (
	OperatorEmail    = "ops@example.com"
	OperatorPassword = "correct horse battery staple"
)

// Config is a complete ServeConfig for a plane on loopback that provisions
// through prov and messages through its nats-server. Callers adjust it
// before Start.
func Config(t pgtest.TB, prov *provisionertest.Stack) app.ServeConfig {
	t.Helper()
	caDir := filepath.Join(t.TempDir(), "ca")
	if _, err := x509ca.Init(caDir, x509ca.InitOptions{DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	grpc := fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	return app.ServeConfig{
		PGDSN: pgtest.DSN(t), ListenAddr: "127.0.0.1:0", GRPCListenAddr: grpc, MetricsListenAddr: "127.0.0.1:0",
		CADir: caDir, SensorCertTTL: 168 * time.Hour, CORSAllowedOrigins: []string{"http://localhost:8000"},
		LocalMode: true, PublicGRPCAddr: grpc, PublicNATSURL: prov.NATSURL,
		CommandStreamName: "RXC_CMD", CommandTTL: 10 * time.Minute, SensorOfflineAfter: time.Minute, SessionTTL: time.Hour,
		RedeemPerMinute: 60, RedeemBurst: 20, MigrateOnStart: true, ShutdownTimeout: 5 * time.Second, LogLevel: "error",
		BootstrapOperatorEmail: OperatorEmail, BootstrapOperatorPassword: OperatorPassword,
		Provisioner: app.ProvisionerConfig{Enabled: true, BaseURL: prov.URL, SharedSecret: prov.Secret,
			SharedSecretName: "X-Backend-Shared-Secret", IntervalSeconds: 5, TimeoutSeconds: 5,
			BreakerFailures: 5, BreakerOpenSeconds: 30},
		Messaging: app.MessagingConfig{Enabled: true, URL: prov.NATSURL},
	}
}

// Plane is a running control plane.
type Plane struct {
	t      pgtest.TB
	Config app.ServeConfig
	Server *app.Server
	// Base is the HTTP API's root URL; GRPCAddr the sensor gRPC address.
	Base     string
	GRPCAddr string
	// Metrics is the root URL of the metrics listener (GET /metrics).
	Metrics string
	// CAPEM is the sensor CA certificate.
	CAPEM  []byte
	cancel context.CancelFunc
	done   chan error
	logs   []*logbuf.Buffer
}

// Logs returns what the plane logged in this test, every start included
// (empty for a load driver, whose plane logs to standard error).
func (p *Plane) Logs() string {
	var b strings.Builder
	for _, l := range p.logs {
		b.WriteString(l.String())
	}
	return b.String()
}

// Start runs a control plane with cfg until the test ends, and waits until
// it is ready (HTTP answers and every enabled dependency is connected).
func Start(t pgtest.TB, cfg app.ServeConfig) *Plane {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(cfg.CADir, x509ca.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	p := &Plane{t: t, Config: cfg, GRPCAddr: cfg.PublicGRPCAddr, CAPEM: caPEM}
	p.start()
	t.Cleanup(p.Stop)
	return p
}

func (p *Plane) start() {
	p.t.Helper()
	lvl := slog.LevelError
	_ = lvl.UnmarshalText([]byte(p.Config.LogLevel))
	// A test sees the plane's log only when it fails; a load driver (no
	// Failed) gets it on stderr.
	// Every record must parse as JSON with each key once: checked when the
	// test ends.
	var w io.Writer = os.Stderr
	if f, ok := p.t.(interface{ Failed() bool }); ok {
		buf := &logbuf.Buffer{}
		w = buf
		p.logs = append(p.logs, buf)
		p.t.Cleanup(func() {
			if dups := logbuf.DuplicateKeys(buf.String()); len(dups) > 0 {
				p.t.Errorf("control plane log records with a key twice:\n%s", strings.Join(dups, "\n"))
			}
			if f.Failed() && buf.String() != "" {
				p.t.Logf("control plane log:\n%s", buf.String())
			}
		})
	}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.NewServer(ctx, p.Config, log)
	if err != nil {
		cancel()
		p.t.Fatalf("control plane: %v", err)
	}
	p.Server, p.Base, p.cancel, p.done = srv, "http://"+srv.HTTPAddr(), cancel, make(chan error, 1)
	p.Metrics = "http://" + srv.MetricsAddr()
	go func() { p.done <- srv.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.Base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		if err == nil && srv.Ready() {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("control plane not ready within 30s")
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Stop shuts the plane down gracefully; it is safe to call twice.
func (p *Plane) Stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.t.Errorf("control plane did not stop within 20s")
	}
	p.cancel = nil
}

// Resume starts a stopped plane again on the same database, CA and gRPC
// address. The HTTP address is the configured one: with port 0 it changes
// and Base follows; a fixed port keeps the URL sensors were given.
func (p *Plane) Resume() {
	p.t.Helper()
	p.start()
}

// Restart is Stop then Resume.
func (p *Plane) Restart() {
	p.t.Helper()
	p.Stop()
	p.start()
}

// Pool opens a pool on the plane's database, closed when the test ends.
func (p *Plane) Pool() *pgxpool.Pool { return pgtest.Pool(p.t, p.Config.PGDSN) }

// Client talks JSON to the API and keeps cookies.
type Client struct {
	base func() string // the API's base URL, read at each request
	HTTP *http.Client
}

// NewClient returns a client of this plane (wherever a restart puts it)
// with its own cookie jar.
func (p *Plane) NewClient() *Client {
	return newClient(func() string { return p.Base })
}

// NewClient returns a client of the control plane API at base (a plane
// this package did not start, such as rxc-dev's) with its own cookie jar.
func NewClient(base string) *Client {
	return newClient(func() string { return base })
}

func newClient(base func() string) *Client {
	jar, _ := cookiejar.New(nil)
	return &Client{base: base, HTTP: &http.Client{Jar: jar, Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}}
}

// Response is an answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends body as JSON (nil: no body) with an optional bearer token and
// returns the status and body.
func (c *Client) Do(method, path string, body any, bearer string) (int, []byte, error) {
	resp, err := c.Send(method, path, body, bearer, nil)
	if err != nil {
		return 0, nil, err
	}
	return resp.Status, resp.Body, nil
}

// Send is Do with extra request headers, returning the response headers too.
func (c *Client) Send(method, path string, body any, bearer string, header http.Header) (Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.base()+path, rd)
	if err != nil {
		return Response{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: out}, err
}

// Call is Do that wants status want and decodes the answer into into (when
// not nil).
func (c *Client) Call(method, path string, body any, bearer string, want int, into any) error {
	status, out, err := c.Do(method, path, body, bearer)
	if err != nil {
		return err
	}
	if status != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, status, want, out)
	}
	if into != nil {
		if err := json.Unmarshal(out, into); err != nil {
			return fmt.Errorf("%s %s: decode %s: %w", method, path, out, err)
		}
	}
	return nil
}

// Login logs the client in as the bootstrap operator.
func (c *Client) Login() error {
	return c.Call(http.MethodPost, "/api/auth/login", map[string]string{"email": OperatorEmail, "password": OperatorPassword}, "", http.StatusNoContent, nil)
}

// Checked is a Client whose errors end the test: a request that fails, a
// status other than the one wanted, an answer that does not decode.
type Checked struct {
	*Client
	t pgtest.TB
}

// Checked returns c with its errors ending t.
func (c *Client) Checked(t pgtest.TB) Checked { return Checked{Client: c, t: t} }

// Status sends body as JSON (nil: no body) with an optional bearer token and
// returns the status and body.
func (c Checked) Status(method, path string, body any, bearer string) (int, []byte) {
	c.t.Helper()
	status, out, err := c.Do(method, path, body, bearer)
	if err != nil {
		c.t.Fatal(err)
	}
	return status, out
}

// Must sends the request, wants status want and decodes the answer into
// into (when not nil).
func (c Checked) Must(method, path string, body any, bearer string, want int, into any) {
	c.t.Helper()
	if err := c.Call(method, path, body, bearer, want, into); err != nil {
		c.t.Fatal(err)
	}
}
