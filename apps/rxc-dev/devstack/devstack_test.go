package devstack_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/adapters/misp/misptest"
	"github.com/rxc-project/rxc/adapters/openai/openaitest"
	"github.com/rxc-project/rxc/adapters/x509ca/x509catest"
	cpapp "github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/rxc-dev/devstack"
	"github.com/rxc-project/rxc/internal/waitfor"
	"github.com/rxc-project/rxc/sdk/agentwire"
)

// stateDir is a fresh state folder PostgreSQL's user can reach when the
// test runs as root (t.TempDir's parent is closed to others).
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rxc-devstack-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "state")
}

func startStack(t *testing.T, cfg devstack.Config) *devstack.Stack {
	t.Helper()
	s, err := devstack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func stopStack(t *testing.T, s *devstack.Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// client is an operator's (or a sensor's) view of the control plane's API,
// ending the test where a request fails.
type client struct {
	controlplanetest.Checked
	t *testing.T
}

func newClient(t *testing.T, base string) *client {
	return &client{Checked: controlplanetest.NewClient(base).Checked(t), t: t}
}

type tenant struct {
	ID                string `json:"id"`
	NATSStatus        string `json:"natsStatus"`
	NATSAccountPubKey string `json:"natsAccountPubKey"`
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	waitfor.Until(t, limit, what, ok)
}

// enrol does what a sensor agent does: redeem a claim code, enrol a CSR.
func (c *client) enrol(tenantID string) agentwire.EnrollResponse {
	c.t.Helper()
	var code struct{ Code string }
	c.Must("POST", "/api/tenants/"+tenantID+"/claim-codes", map[string]any{"ttlSeconds": 600, "sensorName": "edge-1"}, "", 201, &code)
	var red struct{ SensorID, EnrollmentToken string }
	c.Must("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": code.Code, "hostname": "edge-1"}, "", 201, &red)
	_, csr := x509catest.KeyCSR(c.t)
	var enr agentwire.EnrollResponse
	c.Must("POST", "/api/sensors/"+red.SensorID+"/agent/enroll", map[string]string{"csr": string(csr)}, red.EnrollmentToken, 201, &enr)
	return enr
}

// sensorConn connects to natsURL with the sensor's creds and its inbox.
func sensorConn(t *testing.T, natsURL string, enr agentwire.EnrollResponse) *nats.Conn {
	t.Helper()
	tok, err := jwt.ParseDecoratedJWT([]byte(enr.NATS.Creds))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedNKey([]byte(enr.NATS.Creds))
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	nc, err := nats.Connect(natsURL, nats.UserJWTAndSeed(tok, string(seed)), nats.CustomInboxPrefix(enr.NATS.InboxPrefix), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("sensor NATS connect to %s: %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestStackResumesFromItsStateFolder(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	model := openaitest.New(t, "model-key", "local-model", "hello")
	intel := misptest.New(t, "misp-key")
	cfg := devstack.Config{
		StateDir: dir, Web: devstack.WebGo, WebDir: webDir(t), Tenant: "demo", LogLevel: "warn",
		ProvisionerAddr: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", WebAddr: "127.0.0.1:0",
		SeedSensors: 120, SeedTenant: "fleet",
		Chat: cpapp.ChatConfig{
			Enabled: true, BaseURL: model.URL, Model: model.Model, APIKey: model.Key,
			Enrichment: cpapp.EnrichmentConfig{Enabled: true, MISPURL: intel.URL, MISPKey: intel.Key},
		},
	}
	first := startStack(t, cfg)
	info := first.Info()
	if info.Email != devstack.OperatorEmail || len(info.Password) < 16 {
		t.Fatalf("login %q / %d characters of password", info.Email, len(info.Password))
	}
	opFile, err := os.Stat(filepath.Join(dir, "operator.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := opFile.Mode().Perm(); perm != 0o600 {
		t.Fatalf("operator.txt has mode %04o, want 0600", perm)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "operator.txt")); !strings.Contains(string(data), info.Password) {
		t.Fatal("operator.txt does not hold the printed password")
	}
	checkConsole(t, info, true)
	checkDurable(t, info.PGDSN)

	// A second stack on the same folder is refused while the first runs.
	second, err := devstack.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second stack on a folder in use: %v, want an error saying so", err)
	}

	api := newClient(t, info.APIBaseURL)
	if got, _ := api.Status("POST", "/api/auth/login", map[string]string{"email": info.Email, "password": "wrong"}, ""); got != 401 {
		t.Fatalf("login with a wrong password: status %d, want 401", got)
	}
	api.Must("POST", "/api/auth/login", map[string]string{"email": info.Email, "password": info.Password}, "", 204, nil)

	// The seeded fleet is in its own tenant, visible through the API.
	if info.SeedTenant != "fleet" || info.SeededSensors != 120 {
		t.Fatalf("seeded %d sensors in %q, want 120 in fleet", info.SeededSensors, info.SeedTenant)
	}
	var seeded struct {
		Items []struct{ ID, TenantID, State string }
	}
	api.Must("GET", "/api/sensors?tenantId=fleet&limit=500", nil, "", 200, &seeded)
	if len(seeded.Items) != 120 {
		t.Fatalf("%d sensors in the seeded tenant, want 120", len(seeded.Items))
	}

	// The chat configuration reached the control plane.
	var chat struct {
		Enabled      bool
		Model        string
		Capabilities struct{ ThreatIntel bool }
	}
	api.Must("GET", "/api/analytics/chat/status", nil, "", 200, &chat)
	if !chat.Enabled || chat.Model != model.Model || !chat.Capabilities.ThreatIntel {
		t.Fatalf("chat status %+v, want enabled with %s and threat intel", chat, model.Model)
	}

	// The demo tenant was provisioned during start; a new one is by the worker.
	var demo tenant
	api.Must("GET", "/api/tenants/demo", nil, "", 200, &demo)
	if demo.NATSStatus != "provisioned" {
		t.Fatalf("demo tenant after start: %+v, want provisioned", demo)
	}
	var acme tenant
	api.Must("POST", "/api/tenants", map[string]string{"id": "acme", "name": "Acme"}, "", 201, &acme)
	waitUntil(t, 30*time.Second, "tenant acme provisioned", func() bool {
		api.Must("GET", "/api/tenants/acme", nil, "", 200, &acme)
		return acme.NATSStatus == "provisioned" && acme.NATSAccountPubKey != ""
	})
	enr := api.enrol("acme")
	if enr.NATS.URL != info.NATSURL {
		t.Fatalf("enrolment tells sensors NATS %q, want %q", enr.NATS.URL, info.NATSURL)
	}
	sensorConn(t, info.NATSURL, enr).Close()

	seed, _ := os.ReadFile(filepath.Join(dir, "provisioner", "operator.nk"))
	caCert, _ := os.ReadFile(filepath.Join(dir, "ca", "ca.crt"))
	if len(seed) == 0 || len(caCert) == 0 {
		t.Fatal("no operator seed or CA certificate in the state folder")
	}
	stopStack(t, first)
	if got, _ := http.Get(info.APIBaseURL + "/healthz"); got != nil {
		got.Body.Close()
		t.Fatal("the API still answers after stop")
	}

	// Resume: same data, and the same ports (all were 0, so the stack
	// remembered them): sensors keep dialling what enrolment told them.
	again := startStack(t, cfg)
	info2 := again.Info()
	if info2.Password != info.Password {
		t.Fatal("the operator password changed on resume")
	}
	if info2.NATSURL != info.NATSURL || info2.GRPCAddr != info.GRPCAddr || info2.APIBaseURL != info.APIBaseURL {
		t.Fatalf("addresses after resume %s %s %s, want %s %s %s", info2.NATSURL, info2.GRPCAddr, info2.APIBaseURL, info.NATSURL, info.GRPCAddr, info.APIBaseURL)
	}
	if seed2, _ := os.ReadFile(filepath.Join(dir, "provisioner", "operator.nk")); !bytes.Equal(seed, seed2) {
		t.Fatal("the operator seed changed on resume")
	}
	if ca2, _ := os.ReadFile(filepath.Join(dir, "ca", "ca.crt")); !bytes.Equal(caCert, ca2) {
		t.Fatal("the sensor CA changed on resume")
	}
	api = newClient(t, info2.APIBaseURL)
	api.Must("POST", "/api/auth/login", map[string]string{"email": info2.Email, "password": info.Password}, "", 204, nil)
	var acme2 tenant
	api.Must("GET", "/api/tenants/acme", nil, "", 200, &acme2)
	if acme2 != acme {
		t.Fatalf("tenant after resume %+v, want %+v", acme2, acme)
	}
	api.Must("GET", "/api/sensors/"+enr.SensorID, nil, "", 200, nil)

	// The sensor's creds from the first run still work against the resumed
	// nats-server (same operator, accounts resolved through the provisioner),
	// its durable consumer survived in the JetStream store, and a command
	// sent now reaches it.
	nc := sensorConn(t, enr.NATS.URL, enr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.NewWithAPIPrefix(nc, enr.NATS.JSAPIPrefix)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, enr.NATS.Stream, enr.NATS.Consumer)
	if err != nil {
		t.Fatalf("consumer %s after resume: %v", enr.NATS.Consumer, err)
	}
	var cmd struct{ CommandID string }
	api.Must("POST", "/api/sensors/"+enr.SensorID+"/commands", map[string]string{"action": "start"}, "", 202, &cmd)
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("command after resume: %v", err)
	}
	if !strings.Contains(string(msg.Data()), cmd.CommandID) {
		t.Fatalf("command on the wire %s, want id %s", msg.Data(), cmd.CommandID)
	}
	_ = msg.Ack()
	stopStack(t, again)
}

// buildAgent builds the reference sensor agent for the test.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sensor-agent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rxc-project/rxc/apps/sensor-agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go build sensor-agent: %v\n%s", err, out)
	}
	return bin
}

// webDir is a web/ folder with the repository's nginx configuration and
// entrypoint hook and a stand-in build in dist/.
func webDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"nginx/nginx.conf", "nginx/default.conf", "nginx/security-headers.conf", "docker-entrypoint.d/40-rxc-config.sh"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "web", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dist", "index.html"), []byte("<!doctype html><title>RXC</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type sensorItem struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	State       string `json:"state"`
	LastCommand *struct {
		Action string `json:"action"`
	} `json:"lastCommand"`
}

func listSensors(c *client, tenantID string) []sensorItem {
	var list struct{ Items []sensorItem }
	c.Must("GET", "/api/sensors?tenantId="+tenantID, nil, "", 200, &list)
	return list.Items
}

// checkConsole asserts the console answers a deep link with the SPA and
// /config.js, written by the real entrypoint hook, with the API's address
// and the chat flag.
func checkConsole(t *testing.T, info devstack.Info, chat bool) {
	t.Helper()
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(info.WebURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := get("/config.js")
	if want := `"apiBaseUrl":"` + info.APIBaseURL + `"`; !strings.Contains(body, want) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("config.js %q (Cache-Control %q), want %s and no-store", body, resp.Header.Get("Cache-Control"), want)
	}
	if want := `"analyticsAiChatEnabled":` + strconv.FormatBool(chat); !strings.Contains(body, want) {
		t.Fatalf("config.js %q, want %s", body, want)
	}
	resp, body = get("/sensors/s-1")
	if resp.StatusCode != 200 || !strings.Contains(body, "<title>RXC</title>") {
		t.Fatalf("deep link: %d %q, want the SPA", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' "+info.APIBaseURL+";") {
		t.Fatalf("Content-Security-Policy %q does not allow the API", csp)
	}
}

// The demo's sensors are enrolled by the real agent, started by the stack
// so that they stream events into Analytics at once, report status over
// NATS, and come back as the same sensors when the stack resumes — a sensor
// an operator stopped stays stopped, the others run again; nginx serves the
// console with the production configuration.
func TestStackRunsSimulatedSensorsBehindNginx(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	cfg := devstack.Config{
		StateDir: dir, Web: devstack.WebNginx, WebDir: webDir(t), Tenant: "demo", Sensors: 2, SensorAgent: buildAgent(t), LogLevel: "warn",
		StartSensors:    true,
		ProvisionerAddr: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", WebAddr: "127.0.0.1:0",
	}
	first := startStack(t, cfg)
	info := first.Info()
	if info.Sensors != 2 || info.Web != devstack.WebNginx {
		t.Fatalf("info %+v, want 2 sensors and nginx serving the console", info)
	}
	checkConsole(t, info, false)

	api := newClient(t, info.APIBaseURL)
	api.Must("POST", "/api/auth/login", map[string]string{"email": info.Email, "password": info.Password}, "", 204, nil)
	var before []sensorItem
	waitUntil(t, 60*time.Second, "both sensors running without any operator command", func() bool {
		before = listSensors(api, "demo")
		return len(before) == 2 && countState(before, "running") == 2
	})
	waitUntil(t, 90*time.Second, "events from the simulated sensors in Analytics", func() bool {
		var ov struct {
			Totals struct{ Events int64 }
		}
		now := time.Now().UTC()
		q := "tenantId=demo&from=" + now.Add(-time.Hour).Format(time.RFC3339) + "&to=" + now.Add(time.Minute).Format(time.RFC3339)
		api.Must("GET", "/api/analytics/overview?"+q, nil, "", 200, &ov)
		return ov.Totals.Events > 0
	})
	// The operator stops one sensor; the next run must respect that.
	stopped := before[0].ID
	api.Must("POST", "/api/sensors/"+stopped+"/commands", map[string]string{"action": "stop"}, "", 202, nil)
	waitUntil(t, 60*time.Second, "the stopped sensor stopped", func() bool {
		var s sensorItem
		api.Must("GET", "/api/sensors/"+stopped, nil, "", 200, &s)
		return s.State == "stopped"
	})
	stopStack(t, first)

	again := startStack(t, cfg)
	api = newClient(t, again.Info().APIBaseURL)
	api.Must("POST", "/api/auth/login", map[string]string{"email": info.Email, "password": info.Password}, "", 204, nil)
	after := listSensors(api, "demo")
	if len(after) != 2 {
		t.Fatalf("sensors after resume %+v, want the same two", after)
	}
	ids := map[string]bool{before[0].ID: true, before[1].ID: true}
	for _, s := range after {
		if !ids[s.ID] {
			t.Fatalf("sensor %s after resume is new; before: %+v", s.ID, before)
		}
	}
	waitUntil(t, 60*time.Second, "the other sensor running again after the resume", func() bool {
		var s sensorItem
		api.Must("GET", "/api/sensors/"+before[1].ID, nil, "", 200, &s)
		return s.State == "running"
	})
	var s sensorItem
	api.Must("GET", "/api/sensors/"+stopped, nil, "", 200, &s)
	if s.State == "running" || s.LastCommand == nil || s.LastCommand.Action != "stop" {
		t.Fatalf("the sensor the operator stopped is %q after the resume (last command %+v): the stack started it again", s.State, s.LastCommand)
	}
	var cmd struct{ CommandID string }
	api.Must("POST", "/api/sensors/"+stopped+"/commands", map[string]string{"action": "start"}, "", 202, &cmd)
	waitUntil(t, 60*time.Second, "the resumed sensor running", func() bool {
		var s sensorItem
		api.Must("GET", "/api/sensors/"+stopped, nil, "", 200, &s)
		return s.State == "running"
	})
	stopStack(t, again)
}

func countState(ss []sensorItem, state string) int {
	n := 0
	for _, s := range ss {
		if s.State == state {
			n++
		}
	}
	return n
}

// checkDurable asserts the demo's PostgreSQL keeps its durable defaults: a
// command answered 202 must survive a crash of the machine.
func checkDurable(t *testing.T, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, setting := range []string{"synchronous_commit", "fsync", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("demo PostgreSQL runs with %s=%s, want on", setting, v)
		}
	}
}

// As root, a state folder the postgres user cannot reach (under a 0700
// folder, like a home) gets its cluster in a folder of the postgres user's
// own, recorded in the state folder; Clean removes both, and refuses while
// the stack runs.
func TestStackAsRootInAClosedFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the relocation is for root's closed home folders")
	}
	t.Parallel()
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(closed, "checkout", ".demo")
	cfg := devstack.Config{
		StateDir: dir, Web: devstack.WebNone, LogLevel: "warn",
		ProvisionerAddr: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", WebAddr: "127.0.0.1:0",
	}
	s := startStack(t, cfg)
	loc, err := os.ReadFile(filepath.Join(dir, "pg-location"))
	if err != nil {
		t.Fatalf("no pg-location in the state folder: %v", err)
	}
	cluster := strings.TrimSpace(string(loc))
	t.Cleanup(func() { os.RemoveAll(cluster) })
	if strings.HasPrefix(cluster, closed) || filepath.Base(filepath.Dir(cluster)) != "rxc-dev" {
		t.Fatalf("cluster in %s, want a folder of its own outside %s", cluster, closed)
	}
	if _, err := os.Stat(filepath.Join(cluster, "data", "PG_VERSION")); err != nil {
		t.Fatalf("no cluster in %s: %v", cluster, err)
	}
	if _, err := devstack.Clean(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Clean of a running stack's folder: %v, want a refusal", err)
	}
	checkDurable(t, s.Info().PGDSN)
	stopStack(t, s)

	// A second run finds the same cluster.
	s = startStack(t, cfg)
	if got := s.Info().PGDSN; got == "" {
		t.Fatal("no DSN on resume")
	}
	stopStack(t, s)

	removed, err := devstack.Clean(dir)
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if len(removed) != 2 || removed[0] != cluster || removed[1] != dir {
		t.Fatalf("Clean removed %v, want %s and %s", removed, cluster, dir)
	}
	for _, p := range []string{cluster, dir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still exists after Clean: %v", p, err)
		}
	}
	if _, err := devstack.Clean(t.TempDir()); err == nil {
		t.Fatal("Clean of a folder that is no state folder succeeded")
	}
}

// A port of the stack taken by another program stops the start before anything runs, with a
// message naming the port and the rxc-dev flag that moves it; no process of the stack is left
// and the state folder is free for the next try.
func TestBusyPortIsNamedAndNothingIsLeftRunning(t *testing.T) {
	t.Parallel()
	cases := []struct {
		flag string
		set  func(c *devstack.Config, addr string)
	}{
		{"-nats-addr", func(c *devstack.Config, a string) { c.NATSAddr = a }},
		{"-provisioner-addr", func(c *devstack.Config, a string) { c.ProvisionerAddr = a }},
		{"-api-addr", func(c *devstack.Config, a string) { c.APIAddr = a }},
		{"-grpc-addr", func(c *devstack.Config, a string) { c.GRPCAddr = a }},
		{"-web-addr", func(c *devstack.Config, a string) { c.WebAddr = a }},
	}
	dir := stateDir(t)
	for _, tc := range cases {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg := devstack.Config{
			StateDir: dir, Web: devstack.WebGo, WebDir: webDir(t), Tenant: "demo", LogLevel: "warn",
			ProvisionerAddr: "127.0.0.1:0", NATSAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", WebAddr: "127.0.0.1:0",
		}
		tc.set(&cfg, taken.Addr().String())
		s, err := devstack.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Start(context.Background())
		taken.Close()
		port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
		if err == nil || !strings.Contains(err.Error(), "port "+port) || !strings.Contains(err.Error(), tc.flag+" 127.0.0.1:") {
			t.Fatalf("%s taken: start error %v, want the port %s and the flag %s named", tc.flag, err, port, tc.flag)
		}
		if left := processesMentioning(t, dir); len(left) > 0 {
			t.Fatalf("%s taken: processes left running: %v", tc.flag, left)
		}
	}
	// The folder is not locked by the failed starts.
	if _, err := devstack.Clean(dir); err != nil {
		t.Fatalf("clean after failed starts: %v", err)
	}
}

// processesMentioning lists the command lines of running processes that name dir (or the
// PostgreSQL folder the state folder points to).
func processesMentioning(t *testing.T, dir string) []string {
	t.Helper()
	needles := []string{dir}
	if loc, err := os.ReadFile(filepath.Join(dir, "pg-location")); err == nil && len(strings.TrimSpace(string(loc))) > 0 {
		needles = append(needles, strings.TrimSpace(string(loc)))
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		line := strings.ReplaceAll(string(b), "\x00", " ")
		for _, n := range needles {
			if strings.Contains(line, n) {
				left = append(left, line)
			}
		}
	}
	return left
}
