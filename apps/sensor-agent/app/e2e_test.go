package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	cpapp "github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/apps/sensor-agent/app"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/internal/waitfor"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const tenantID = "acme"

// logBuffer collects JSON log lines written concurrently.
type logBuffer struct{ logbuf.Buffer }

// lines returns the decoded log records from byte offset from on.
func (b *logBuffer) lines(from int) []map[string]any {
	s := b.String()
	if from > len(s) {
		from = len(s)
	}
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s[from:]))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// has reports whether a record from offset from on has msg containing
// substr and every attribute in attrs.
func (b *logBuffer) has(from int, substr string, attrs map[string]string) bool {
	for _, rec := range b.lines(from) {
		msg, _ := rec["msg"].(string)
		if !strings.Contains(msg, substr) {
			continue
		}
		ok := true
		for k, v := range attrs {
			if got, _ := rec[k].(string); !strings.Contains(got, v) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (b *logBuffer) len() int { return len(b.String()) }

// agentUser is the NATS user of the agent's current creds.
func agentUser(t *testing.T, stateDir string) *jwt.UserClaims {
	t.Helper()
	creds, err := os.ReadFile(filepath.Join(stateDir, "nats.creds"))
	if err != nil {
		t.Fatal(err)
	}
	return provisionertest.UserClaims(t, creds)
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	waitfor.Until(t, limit, what, ok)
}

// plane is the real control plane (controlplanetest) on a fixed HTTP port,
// so agents keep their API URL when it is stopped and resumed.
type plane struct {
	*controlplanetest.Plane
	t      *testing.T
	client *controlplanetest.Client
}

func newPlane(t *testing.T, prov *provisionertest.Stack, certTTL time.Duration) *plane {
	t.Helper()
	cfg := agentPlaneConfig(t, prov)
	cfg.SensorCertTTL = certTTL
	cfg.RenewMinInterval = time.Second
	return startPlane(t, cfg)
}

// agentPlaneConfig is the control plane the agent tests run: an API port
// of its own (an agent keeps the URL across a restart of the plane), a
// short shutdown and info logs.
// tenantPlane starts a provisioner with opts and a control plane signing
// sensor certificates valid certTTL, with the test tenant set up.
func tenantPlane(t *testing.T, opts provisionertest.Options, certTTL time.Duration) (*provisionertest.Stack, *plane) {
	t.Helper()
	prov := provisionertest.Start(t, opts)
	p := newPlane(t, prov, certTTL)
	p.setUpTenant()
	return prov, p
}

func agentPlaneConfig(t *testing.T, prov *provisionertest.Stack) cpapp.ServeConfig {
	t.Helper()
	cfg := controlplanetest.Config(t, prov)
	cfg.ListenAddr = fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	cfg.ShutdownTimeout = 3 * time.Second
	cfg.LogLevel = "info"
	return cfg
}

func startPlane(t *testing.T, cfg cpapp.ServeConfig) *plane {
	t.Helper()
	cp := controlplanetest.Start(t, cfg)
	return &plane{Plane: cp, t: t, client: cp.NewClient()}
}

// ownPostgres starts a PostgreSQL cluster for this test alone, which it
// may halt and resume; cfg's database moves there.
func ownPostgres(t *testing.T, cfg *cpapp.ServeConfig) *pgtest.Cluster {
	t.Helper()
	cluster := pgtest.Own(t)
	cfg.PGDSN = cluster.DSN("postgres")
	return cluster
}

// enrolAgent starts an agent on stateDir with a claim code from the
// environment, as in production, and waits until its sensor is online; it
// returns the agent and the sensor's id. Later runs on stateDir resume
// without a code.
func (p *plane) enrolAgent(stateDir string, extra ...string) (*agent, string) {
	p.t.Helper()
	p.t.Setenv("RXC_CLAIM_CODE", p.claimCode("edge-1"))
	a := startAgent(p.t, agentArgs(p, stateDir, extra...)...)
	var id string
	waitUntil(p.t, 30*time.Second, "the sensor enrolled and online", func() bool {
		if list := p.sensors(); len(list) == 1 && list[0].State == "online" {
			id = list[0].ID
		}
		return id != ""
	})
	p.t.Setenv("RXC_CLAIM_CODE", "")
	return a, id
}

func (p *plane) must(method, path string, body any, want int, into any) {
	p.t.Helper()
	if err := p.client.Call(method, path, body, "", want, into); err != nil {
		p.t.Fatal(err)
	}
}

func (p *plane) login() {
	p.t.Helper()
	if err := p.client.Login(); err != nil {
		p.t.Fatal(err)
	}
}

// setUpTenant logs in, creates the tenant and waits for its NATS account.
func (p *plane) setUpTenant() {
	p.t.Helper()
	p.login()
	p.must("POST", "/api/tenants", map[string]string{"id": tenantID, "name": "Acme Corp"}, 201, nil)
	waitUntil(p.t, 20*time.Second, "tenant provisioned", func() bool {
		var tenant struct{ NatsStatus string }
		p.must("GET", "/api/tenants/"+tenantID, nil, 200, &tenant)
		return tenant.NatsStatus == "provisioned"
	})
}

func (p *plane) claimCode(name string) string {
	p.t.Helper()
	var code struct{ Code string }
	p.must("POST", "/api/tenants/"+tenantID+"/claim-codes", map[string]any{"ttlSeconds": 600, "sensorName": name}, 201, &code)
	return code.Code
}

func (p *plane) sensors() []controlplanetest.SensorView {
	p.t.Helper()
	var list struct{ Items []controlplanetest.SensorView }
	p.must("GET", "/api/sensors?tenantId="+tenantID, nil, 200, &list)
	return list.Items
}

func (p *plane) sensor(id string) controlplanetest.SensorView {
	p.t.Helper()
	var v controlplanetest.SensorView
	p.must("GET", "/api/sensors/"+id, nil, 200, &v)
	return v
}

// command sends action and waits until the API shows the sensor in want
// with that command acknowledged.
func (p *plane) command(id, action, want string) {
	p.t.Helper()
	var cmd struct{ CommandID string }
	p.must("POST", "/api/sensors/"+id+"/commands", map[string]string{"action": action}, 202, &cmd)
	waitUntil(p.t, 15*time.Second, fmt.Sprintf("sensor %s %s after %s with the command acknowledged", id, want, action), func() bool {
		v := p.sensor(id)
		return v.State == want && v.LastCommand != nil && v.LastCommand.CommandID == cmd.CommandID && v.LastCommand.AcknowledgedAt != nil
	})
}

// eventsSince reports whether the control plane confirmed (by its count of
// accepted events at the end of a stream) events of sensor id after agent
// log offset from.
func (a *agent) eventsSince(id string, from int) bool {
	return a.log.has(from, "events confirmed", map[string]string{"sensor_id": id})
}

// agent is a sensor-agent run in-process through its command-line entry.
type agent struct {
	log    *logBuffer
	cancel context.CancelFunc
	done   chan int
}

func startAgent(t *testing.T, args ...string) *agent {
	t.Helper()
	a := &agent{log: &logBuffer{}, done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { a.done <- app.Run(ctx, append([]string{"run"}, args...), io.Discard, a.log) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sensor agent log:\n%s", a.log.String())
		}
		cancel()
		select {
		case <-a.done:
		case <-time.After(30 * time.Second):
			t.Error("sensor agent did not stop within 30s")
		}
	})
	return a
}

// stop interrupts the agent and returns its exit code.
func (a *agent) stop(t *testing.T) int {
	t.Helper()
	a.cancel()
	return a.exit(t, 30*time.Second)
}

func (a *agent) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case code := <-a.done:
		a.done <- code
		return code
	case <-time.After(limit):
		t.Fatalf("sensor agent still running after %s; log:\n%s", limit, a.log.String())
		return -1
	}
}

func (a *agent) running() bool {
	select {
	case code := <-a.done:
		a.done <- code
		return false
	default:
		return true
	}
}

// agentArgs are the flags every test run uses: quick heartbeats, frequent
// events confirmed every second.
func agentArgs(p *plane, stateDir string, extra ...string) []string {
	return append([]string{"--api", p.Base, "--state-dir", stateDir, "--hostname", "edge-1.local",
		"--heartbeat", "1s", "--events-per-minute", "600", "--event-batch-interval", "1s", "--log-level", "debug"}, extra...)
}

// publishRaw puts a payload on the sensor's command subject as the
// control plane's backend user would, bypassing the API's checks.
func publishRaw(t *testing.T, prov *provisionertest.Stack, sensorID string, payload []byte) {
	t.Helper()
	bu := prov.BackendUser("agent-test")
	tok, _ := jwt.ParseDecoratedJWT([]byte(bu.Creds))
	kp, _ := jwt.ParseDecoratedNKey([]byte(bu.Creds))
	seed, _ := kp.Seed()
	nc, err := nats.Connect(prov.NATSURL, nats.UserJWTAndSeed(tok, string(seed)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "rxc."+tenantID+"."+sensorID+".cmd", payload); err != nil {
		t.Fatalf("publish raw command: %v", err)
	}
}

func TestAgentLifecycle(t *testing.T) {
	prov, p := tenantPlane(t, provisionertest.Options{}, 168*time.Hour)
	stateDir := filepath.Join(t.TempDir(), "sensor")

	// First run: the claim code comes from the environment, as in production.
	a, id := p.enrolAgent(stateDir)
	for name, want := range map[string]os.FileMode{"": 0o700, "key.pem": 0o600, "nats.creds": 0o600, "sensor.json": 0o600} {
		fi, err := os.Stat(filepath.Join(stateDir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("state %q: %v mode %v, want %04o", name, err, fi.Mode().Perm(), want)
		}
	}
	if strings.Contains(a.log.String(), "BEGIN") {
		t.Error("the agent logged PEM material")
	}

	// start → running, acknowledged; events reach the control plane.
	p.command(id, "start", "running")
	from := a.log.len()
	waitUntil(t, 15*time.Second, "events from the running sensor", func() bool { return a.eventsSince(id, from) })

	// Commands that must not be applied are acked, reported and skipped;
	// the loop goes on.
	publishRaw(t, prov, id, []byte("not a command"))
	expired, _ := json.Marshal(map[string]any{"commandId": "expired-1", "tenantId": tenantID, "sensorId": id, "action": "stop",
		"issuedAt": time.Now().Add(-time.Hour), "issuedBy": controlplanetest.OperatorEmail, "expiresAt": time.Now().Add(-50 * time.Minute)})
	publishRaw(t, prov, id, expired)
	waitUntil(t, 15*time.Second, "malformed and expired commands skipped", func() bool {
		return a.log.has(0, "command skipped", map[string]string{"error": "malformed"}) &&
			a.log.has(0, "command skipped", map[string]string{"error": "expired", "command_id": "expired-1"})
	})
	if v := p.sensor(id); v.State != "running" {
		t.Fatalf("an expired stop command changed the state to %s", v.State)
	}

	// stop → stopped.
	p.command(id, "stop", "stopped")

	// The control plane restarts: the agent rides it out and keeps working.
	mark := a.log.len()
	p.Stop()
	waitUntil(t, 15*time.Second, "the agent notices the outage", func() bool {
		return a.log.has(mark, "health check failed", nil)
	})
	p.Resume()
	p.login()
	waitUntil(t, 30*time.Second, "health checks succeed after the restart", func() bool {
		return a.log.has(mark, "health check succeeds again", nil)
	})
	if !a.running() {
		t.Fatalf("agent exited during the control plane restart:\n%s", a.log.String())
	}
	p.command(id, "start", "running")
	from = a.log.len()
	waitUntil(t, 20*time.Second, "events after the restart", func() bool { return a.eventsSince(id, from) })

	// nats-server restarts: the agent reconnects and takes commands again.
	mark = a.log.len()
	prov.StopNATS()
	waitUntil(t, 10*time.Second, "the agent notices the NATS outage", func() bool { return a.log.has(mark, "nats disconnected", nil) })
	prov.StartNATS()
	waitUntil(t, 30*time.Second, "the agent reconnected to NATS", func() bool { return a.log.has(mark, "nats reconnected", nil) })
	waitUntil(t, 30*time.Second, "the control plane reconnected to NATS", func() bool {
		status, _, err := p.client.Do("GET", "/readyz", nil, "")
		return err == nil && status < 300
	})
	p.command(id, "stop", "stopped")
	p.command(id, "start", "running")

	// The agent restarts without a claim code: it resumes from its state and
	// the capture it was told to run.
	if code := a.stop(t); code != 0 {
		t.Fatalf("agent exit code %d after SIGINT, want 0:\n%s", code, a.log.String())
	}
	waitUntil(t, 10*time.Second, "final status stopped", func() bool { return p.sensor(id).State == "stopped" })
	a = startAgent(t, agentArgs(p, stateDir)...)
	waitUntil(t, 20*time.Second, "the resumed sensor running again", func() bool { return p.sensor(id).State == "running" })
	if n := len(p.sensors()); n != 1 {
		t.Fatalf("%d sensors after resuming, want 1", n)
	}
	if !a.log.has(0, "resuming sensor from state", map[string]string{"sensor_id": id}) {
		t.Error("no log of the resumption")
	}

	// The operator revokes: the agent is refused on NATS and gRPC and stops
	// with a clear error.
	p.must("POST", "/api/sensors/"+id+"/revoke", nil, 200, nil)
	if code := a.exit(t, 20*time.Second); code != 1 {
		t.Fatalf("agent exit code %d after revocation, want 1", code)
	}
	if os.Getenv("RXC_TEST_SHOW_AGENT_LOG") != "" {
		t.Logf("agent log:\n%s", a.log.String())
	}
	if !a.log.has(0, "sensor revoked", map[string]string{"sensor_id": id}) {
		t.Fatalf("no revocation error in the agent's log:\n%s", a.log.String())
	}
	dir, _ := sensorclient.OpenStateDir(stateDir)
	st, err := dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.RevokedAt == nil {
		t.Error("state does not record the revocation")
	}
	cert, _ := st.TLSCertificate()
	g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Check(context.Background(), sensorpb.SensorState_SENSOR_STATE_STOPPED, "test"); !errors.Is(err, sensorclient.ErrGRPCRefused) {
		t.Errorf("health check with the revoked certificate: %v, want refused", err)
	}
	tok, _ := jwt.ParseDecoratedJWT(st.Creds)
	kp, _ := jwt.ParseDecoratedNKey(st.Creds)
	seed, _ := kp.Seed()
	if nc, err := nats.Connect(st.NATS.URL, nats.UserJWTAndSeed(tok, string(seed)), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("NATS accepted the revoked sensor's creds")
	}

	// A later run without a new claim code refuses to start, saying why.
	again := startAgent(t, agentArgs(p, stateDir)...)
	if code := again.exit(t, 10*time.Second); code != 1 || !strings.Contains(again.log.String(), "revoked") {
		t.Fatalf("run on revoked state: exit %d, log %s", code, again.log.String())
	}
}

func TestAgentRunsManySensorsAndRenewsCertificates(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	// Short certificates: the agents renew every few seconds.
	p := newPlane(t, prov, 9*time.Second)
	p.setUpTenant()
	base := t.TempDir()
	codes := filepath.Join(base, "codes.txt")
	var lines []string
	for i := 1; i <= 3; i++ {
		lines = append(lines, p.claimCode(fmt.Sprintf("edge-%d", i)))
	}
	if err := os.WriteFile(codes, []byte("# demo sensors\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(base, "agents")
	a := startAgent(t, agentArgs(p, stateDir, "--count", "3", "--claim-codes-file", codes)...)

	first := map[string]string{}
	waitUntil(t, 30*time.Second, "three sensors online", func() bool {
		list := p.sensors()
		online := 0
		for _, s := range list {
			if s.State == "online" {
				online++
				if s.Certificate != nil && first[s.ID] == "" {
					first[s.ID] = s.Certificate.Serial
				}
			}
		}
		return len(list) == 3 && online == 3
	})
	for i := 1; i <= 3; i++ {
		if _, err := os.Stat(filepath.Join(stateDir, fmt.Sprintf("sensor-%d", i), "sensor.json")); err != nil {
			t.Errorf("sensor %d state: %v", i, err)
		}
	}
	for id := range first {
		p.command(id, "start", "running")
	}

	// Each sensor renews its certificate, and its events keep flowing on
	// the new one (the control plane refuses the old serial).
	for id, serial := range first {
		waitUntil(t, 20*time.Second, "a renewed certificate for "+id, func() bool {
			c := p.sensor(id).Certificate
			return c != nil && c.Serial != serial
		})
		// The log line comes after the switch to the new connection, which
		// ends streams on the old one: what is confirmed later went over
		// the new certificate.
		waitUntil(t, 10*time.Second, "the agent switched to a renewed certificate", func() bool {
			return a.log.has(0, "certificate renewed", map[string]string{"sensor_id": id})
		})
		from := a.log.len()
		waitUntil(t, 15*time.Second, "events from "+id+" after renewal", func() bool { return a.eventsSince(id, from) })
	}
	if a.log.has(0, "sensor revoked", nil) {
		t.Fatalf("a renewal was taken for a revocation:\n%s", a.log.String())
	}
	for id := range first {
		p.command(id, "stop", "stopped")
	}

	// A capture engine that dies turns its sensor to error.
	failing := startAgent(t, agentArgs(p, filepath.Join(base, "failing"), "--claim-code", p.claimCode("edge-4"), "--simulate-failure-after", "300ms")...)
	var failingID string
	waitUntil(t, 20*time.Second, "a fourth sensor online", func() bool {
		for _, s := range p.sensors() {
			if first[s.ID] == "" && s.State == "online" {
				failingID = s.ID
			}
		}
		return failingID != ""
	})
	var cmd struct{ CommandID string }
	p.must("POST", "/api/sensors/"+failingID+"/commands", map[string]string{"action": "start"}, 202, &cmd)
	waitUntil(t, 15*time.Second, "the failed engine reported as error", func() bool {
		v := p.sensor(failingID)
		return v.State == "error" && v.LastCommand != nil && v.LastCommand.CommandID == cmd.CommandID && v.LastCommand.AcknowledgedAt != nil
	})
	if !failing.log.has(0, "capture engine failed", map[string]string{"detail": "exited unexpectedly"}) {
		t.Error("no log of the engine failure")
	}

	if code := a.stop(t); code != 0 {
		t.Fatalf("agent exit code %d, want 0", code)
	}
}

// TestAgentTakesNewNATSCredentialsAfterAnUpgradeRevokedItsUser: an upgrade
// whose topology changed revokes every sensor's NATS user (serve's start-up
// pass); the agent, refused by NATS, renews its certificate, gets the new
// user the provisioner mints in the renewal answer, and commands reach it
// again — without a new claim code.
func TestAgentTakesNewNATSCredentialsAfterAnUpgradeRevokedItsUser(t *testing.T) {
	prov, p := tenantPlane(t, provisionertest.Options{}, 168*time.Hour)
	stateDir := filepath.Join(t.TempDir(), "sensor")
	a, id := p.enrolAgent(stateDir)
	old := agentUser(t, stateDir)
	mark := a.log.len()
	account := provisionertest.UserAccount(old)
	if status, body := prov.Post("/revoke", map[string]string{"accountId": account, "userPubKey": old.Subject}); status != 200 {
		t.Fatalf("revoke the sensor's NATS user: %d %s", status, body)
	}
	p.wantNewNATSUser(a, id, stateDir, old, mark)
}

// wantNewNATSUser waits until the agent, refused by NATS, renewed (logged
// after mark) and took a NATS user other than old, then checks that
// commands reach it again.
func (p *plane) wantNewNATSUser(a *agent, id, stateDir string, old *jwt.UserClaims, mark int) {
	p.t.Helper()
	waitUntil(p.t, 30*time.Second, "the agent renewed and took a new NATS user", func() bool {
		return agentUser(p.t, stateDir).Subject != old.Subject
	})
	if !a.log.has(mark, "the control plane still accepts the sensor", nil) {
		p.t.Error("the agent did not settle the NATS refusal through a renewal")
	}
	p.command(id, "start", "running")
	if v := p.sensor(id); v.State != "running" {
		p.t.Fatalf("sensor %s, want running", v.State)
	}
}

// commandView is a command as the API shows it.
type commandView struct {
	CommandID      string
	Status         string
	IdempotencyKey *string
	Outcome        *string
	OutcomeReason  *string
	OutcomeDetail  *string
	ReportedAt     *time.Time
	AcknowledgedAt *time.Time
	FailedAt       *time.Time
}

func (p *plane) commandOf(sensorID, commandID string) commandView {
	p.t.Helper()
	var page struct{ Items []commandView }
	p.must("GET", "/api/sensors/"+sensorID+"/commands?limit=200", nil, 200, &page)
	for _, c := range page.Items {
		if c.CommandID == commandID {
			return c
		}
	}
	p.t.Fatalf("command %s not in the history of %s", commandID, sensorID)
	return commandView{}
}

// stoppedAgentOwnPostgres starts a provisioner and a control plane on a
// PostgreSQL of its own, which the test may halt and resume (mutate, when
// not nil, adjusts the plane's config first), sets the tenant up, enrols an agent on a fresh
// state folder and stops it. It returns the plane, its PostgreSQL, the
// stopped agent, its state folder and the sensor's id.
func stoppedAgentOwnPostgres(t *testing.T, mutate func(*cpapp.ServeConfig)) (*plane, *pgtest.Cluster, *agent, string, string) {
	t.Helper()
	prov := provisionertest.Start(t, provisionertest.Options{})
	cfg := agentPlaneConfig(t, prov)
	cluster := ownPostgres(t, &cfg)
	if mutate != nil {
		mutate(&cfg)
	}
	p := startPlane(t, cfg)
	p.setUpTenant()
	stateDir := filepath.Join(t.TempDir(), "sensor")
	a, id := p.enrolAgent(stateDir)
	if code := a.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	return p, cluster, a, stateDir, id
}

// TestCommandResultsAreDurableAndExact: a command that reaches the agent
// after its expiresAt is refused and shown refused (reason expired, never
// acknowledged); a command the agent applies while the control plane's
// PostgreSQL is down is shown applied once it is back, because the agent
// repeats its results in every report, even after a restart in between.
func TestCommandResultsAreDurableAndExact(t *testing.T) {
	p, cluster, _, stateDir, id := stoppedAgentOwnPostgres(t, func(c *cpapp.ServeConfig) { c.CommandTTL = 3 * time.Second })

	// Expired on arrival: the agent is down until the command's 3 s are over.
	var late struct{ CommandID, Status string }
	p.must("POST", "/api/sensors/"+id+"/commands", map[string]string{"action": "start"}, 202, &late)
	if late.Status != "accepted" {
		t.Fatalf("command status %q, want accepted", late.Status)
	}
	time.Sleep(4 * time.Second) // lets the command expire: the condition under test
	a := startAgent(t, agentArgs(p, stateDir)...)
	waitUntil(t, 30*time.Second, "the late command shown refused", func() bool {
		return p.commandOf(id, late.CommandID).Outcome != nil
	})
	c := p.commandOf(id, late.CommandID)
	if *c.Outcome != "refused" || c.OutcomeReason == nil || *c.OutcomeReason != "expired" || c.AcknowledgedAt != nil || c.ReportedAt == nil ||
		c.OutcomeDetail == nil || !strings.Contains(*c.OutcomeDetail, "expired") {
		t.Errorf("late command %+v, want refused (expired) with the agent's detail and no acknowledgement", c)
	}
	if v := p.sensor(id); v.State == "running" {
		t.Error("the expired start command was applied")
	}
	if code := a.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}

	// Applied while PostgreSQL is down.
	p.Stop()
	p.Config.CommandTTL = 10 * time.Minute
	p.Resume()
	p.login()
	var cmd struct{ CommandID, Status string }
	p.must("POST", "/api/sensors/"+id+"/commands", map[string]string{"action": "start"}, 202, &cmd)
	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	a = startAgent(t, agentArgs(p, stateDir)...)
	waitUntil(t, 30*time.Second, "the agent applied the command while PostgreSQL is down", func() bool {
		return a.log.has(0, "command received", map[string]string{"command_id": cmd.CommandID}) &&
			a.log.has(0, "status published", map[string]string{"command_id": cmd.CommandID})
	})
	time.Sleep(3 * time.Second) // a few heartbeats go unrecorded: the condition under test
	// The agent restarts before PostgreSQL returns: its results are kept
	// on disk, so the new run still reports the command's outcome.
	if code := a.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	a = startAgent(t, agentArgs(p, stateDir)...)
	waitUntil(t, 30*time.Second, "the restarted agent reporting", func() bool {
		return a.log.has(0, "status published", nil)
	})
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the command shown applied after PostgreSQL returned", func() bool {
		status, _, err := p.client.Do("GET", "/api/sensors/"+id, nil, "")
		if err != nil || status != 200 {
			return false
		}
		c := p.commandOf(id, cmd.CommandID)
		return c.Outcome != nil && c.AcknowledgedAt != nil
	})
	c = p.commandOf(id, cmd.CommandID)
	if *c.Outcome != "applied" || c.Status != "accepted" || c.FailedAt != nil {
		t.Errorf("command applied during the outage: %+v, want accepted and applied", c)
	}
	waitUntil(t, 20*time.Second, "sensor running", func() bool { return p.sensor(id).State == "running" })
}

// grpcGauges reads the control plane's open sensor connections and event
// streams from its metrics.
func (p *plane) grpcGauges() (conns, streams int) {
	p.t.Helper()
	resp, err := http.Get(p.Metrics + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	conns, streams = -1, -1
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rxc_controlplane_grpc_connections "); ok {
			conns, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rxc_controlplane_grpc_event_streams "); ok {
			streams, _ = strconv.Atoi(v)
		}
	}
	return conns, streams
}

// TestIdleAgentHoldsNoConnection: an agent with no event to send holds no
// event stream, and between health checks no gRPC connection, on the
// control plane; its health checks go on over new connections; once
// running, its events are delivered and confirmed, and after it stops the
// connection closes again. Revocation still stops it.
func TestIdleAgentHoldsNoConnection(t *testing.T) {
	_, p := tenantPlane(t, provisionertest.Options{}, 168*time.Hour)
	stateDir := filepath.Join(t.TempDir(), "sensor")
	t.Setenv("RXC_CLAIM_CODE", p.claimCode("edge-1"))
	a := startAgent(t, agentArgs(p, stateDir, "--heartbeat", "2s", "--grpc-idle-timeout", "300ms")...)
	var id string
	waitUntil(t, 20*time.Second, "the sensor enrolled and online", func() bool {
		list := p.sensors()
		if len(list) == 1 && list[0].State == "online" {
			id = list[0].ID
		}
		return id != ""
	})
	t.Setenv("RXC_CLAIM_CODE", "")

	idle := func(what string) {
		t.Helper()
		waitUntil(t, 20*time.Second, what, func() bool { c, s := p.grpcGauges(); return c == 0 && s == 0 })
	}
	idle("no connection or stream of the idle agent")
	// The next health check opens a connection again (it stays open for
	// the 300 ms idle timeout at least) and it closes after it.
	waitUntil(t, 20*time.Second, "a health check's connection", func() bool { c, _ := p.grpcGauges(); return c == 1 })
	idle("the health check's connection closed")
	if a.log.has(0, "health check failed", nil) || a.log.has(0, "health check refused", nil) {
		t.Fatalf("health checks failed over the closing connections:\n%s", a.log.String())
	}

	// Running: events flow and are confirmed.
	p.command(id, "start", "running")
	from := a.log.len()
	waitUntil(t, 20*time.Second, "events from the running sensor", func() bool { return a.eventsSince(id, from) })
	p.command(id, "stop", "stopped")
	idle("no connection or stream once the sensor stopped")

	p.must("POST", "/api/sensors/"+id+"/revoke", nil, 200, nil)
	if code := a.exit(t, 20*time.Second); code != 1 {
		t.Fatalf("agent exit code %d after revocation, want 1", code)
	}
}

// A tenant-wide re-issue (the tenant's revocation list reached
// ACCOUNT_JWT_MAX_BYTES) refuses every user JWT of the tenant issued before
// it; the agent settles the refusal through a renewal, as after an
// upgrade, and carries on with a new NATS user: no re-enrolment, no
// operator.
func TestAgentTakesNewNATSCredentialsAfterATenantReissue(t *testing.T) {
	prov, p := tenantPlane(t, provisionertest.Options{AccountJWTMaxBytes: 4 << 10}, 168*time.Hour)
	stateDir := filepath.Join(t.TempDir(), "sensor")
	a, id := p.enrolAgent(stateDir)
	old := agentUser(t, stateDir)
	mark := a.log.len()
	account := provisionertest.UserAccount(old)
	// Revocations of other keys of the tenant until the list passes its
	// bound and the tenant is re-issued with a "*" entry.
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("200 revocations did not re-issue the tenant")
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		status, body := prov.Post("/revoke", map[string]string{"accountId": account, "userPubKey": pub})
		if status != 200 {
			t.Fatalf("revoke: %d %s", status, body)
		}
		var rr struct{ AccountJWT string }
		if err := json.Unmarshal(body, &rr); err != nil {
			t.Fatal(err)
		}
		ac, err := jwt.DecodeAccountClaims(rr.AccountJWT)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ac.Revocations[jwt.All]; ok {
			break
		}
	}
	p.wantNewNATSUser(a, id, stateDir, old, mark)
}
