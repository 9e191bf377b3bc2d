package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/natstest"
)

// count is how many records from offset 0 have msg containing substr and
// the attribute command_id = id.
func (b *logBuffer) count(substr, id string) int {
	n := 0
	for _, rec := range b.lines(0) {
		msg, _ := rec["msg"].(string)
		if got, _ := rec["command_id"].(string); strings.Contains(msg, substr) && got == id {
			n++
		}
	}
	return n
}

// applied is how many times the agents of runs applied command id: a
// delivery the agent recognised as a repeat is not an application.
func applied(runs []*agent, id string) (deliveries, applications int) {
	for _, a := range runs {
		d := a.log.count("command received", id)
		deliveries += d
		applications += d - a.log.count("delivered again", id)
	}
	return deliveries, applications
}

// answer is what the API said to one command request.
type answer struct {
	status int
	code   string
	cmd    commandView
	retry  string
}

func issue(t *testing.T, c *controlplanetest.Client, sensorID, action, key string) answer {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	res, err := c.Send("POST", "/api/sensors/"+sensorID+"/commands", map[string]string{"action": action}, "", h)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: res.Status, retry: res.Header.Get("Retry-After")}
	var body struct {
		Code string
		commandView
	}
	_ = json.Unmarshal(res.Body, &body)
	a.code, a.cmd = body.Code, body.commandView
	var raw struct{ CommandID string }
	_ = json.Unmarshal(res.Body, &raw)
	a.cmd.CommandID = raw.CommandID
	return a
}

// TestFaults is the fault-injection suite: two control-plane replicas on
// one PostgreSQL, a real nats-server and a real agent; each fault is
// injected, and for every command the test asserts what the operator was
// told, what the record says, how often the agent received and applied it,
// and its acknowledgement. SIGSTOP needs an external nats-server
// (RXC_NATS_SERVER_BIN; make test runs this package with one); with the
// in-process server that step is skipped.
func TestFaults(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	cfg := agentPlaneConfig(t, prov)
	cluster := ownPostgres(t, &cfg)
	a := startPlane(t, cfg)
	cfgB := cfg
	cfgB.ListenAddr = fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	cfgB.GRPCListenAddr = fmt.Sprintf("127.0.0.1:%d", provisionertest.FreePort(t))
	cfgB.PublicGRPCAddr = cfgB.GRPCListenAddr
	b := startPlane(t, cfgB)
	a.setUpTenant()
	b.login()

	stateDir := filepath.Join(t.TempDir(), "sensor")
	run1, id := a.enrolAgent(stateDir)
	runs := []*agent{run1}
	settled := func(what, cmdID, outcome string) commandView {
		t.Helper()
		var c commandView
		waitUntil(t, 60*time.Second, what, func() bool {
			c = b.commandOf(id, cmdID)
			return c.Outcome != nil && *c.Outcome == outcome
		})
		return c
	}
	once := func(what, cmdID string) {
		t.Helper()
		if d, n := applied(runs, cmdID); n != 1 {
			t.Errorf("%s: command %s delivered %d times, applied %d times; want applied once", what, cmdID, d, n)
		}
	}

	// Healthy, with an operator retrying through the other replica: one
	// command, applied once.
	first := issue(t, a.client, id, "start", "fault-start-1")
	if first.status != 202 || first.cmd.Status != "accepted" {
		t.Fatalf("healthy command: %d %+v", first.status, first.cmd)
	}
	for range 3 {
		if r := issue(t, b.client, id, "start", "fault-start-1"); r.status != 200 || r.cmd.CommandID != first.cmd.CommandID {
			t.Fatalf("retry with the same key through B: %d %+v", r.status, r.cmd)
		}
	}
	c := settled("the healthy command applied", first.cmd.CommandID, "applied")
	if c.FailedAt != nil || c.AcknowledgedAt == nil {
		t.Errorf("healthy command record %+v", c)
	}
	once("healthy command retried with its key", first.cmd.CommandID)

	// nats-server killed: refused at once, recorded failed, never delivered.
	prov.NATS.Kill()
	down := issue(t, b.client, id, "stop", "fault-stop-killed")
	if down.status != 503 || down.code != "nats_unavailable" || down.retry == "" {
		t.Errorf("command with nats-server killed: %d %q Retry-After %q; want 503 nats_unavailable", down.status, down.code, down.retry)
	}
	var downID string
	waitUntil(t, 10*time.Second, "the failed command on record", func() bool {
		for _, cv := range b.history(id) {
			if cv.Status == "failed" {
				downID = cv.CommandID
			}
		}
		return downID != ""
	})
	prov.StartNATS()
	waitUntil(t, 60*time.Second, "both replicas ready after nats-server returned", func() bool { return a.ready() && b.ready() })
	after := issue(t, a.client, id, "stop", "fault-stop-after-restart")
	if after.status != 202 {
		t.Fatalf("command after nats-server returned: %d %q", after.status, after.code)
	}
	settled("the command after the restart applied", after.cmd.CommandID, "applied")
	once("command after the restart", after.cmd.CommandID)
	// The later command went through the same consumer: the failed one
	// would have come first.
	if d, _ := applied(runs, downID); d != 0 {
		t.Errorf("the command recorded failed was delivered %d times", d)
	}
	if c := b.commandOf(id, downID); c.Status != "failed" || c.Outcome != nil {
		t.Errorf("failed command record %+v, want failed and never acknowledged", c)
	}

	// nats-server hung (SIGSTOP): the answer says pending, readiness fails,
	// and once it moves again the command is applied exactly once and never
	// shown failed.
	if natstest.External() {
		if err := prov.NATS.Pause(); err != nil {
			t.Fatal(err)
		}
		hung := issue(t, a.client, id, "start", "fault-start-hung")
		if hung.status != 202 || hung.cmd.Status != "pending" {
			t.Errorf("command with nats-server hung: %d %q %+v; want 202 pending", hung.status, hung.code, hung.cmd)
		}
		retry := issue(t, b.client, id, "start", "fault-start-hung")
		if retry.cmd.CommandID != hung.cmd.CommandID {
			t.Errorf("retry during the hang made another command: %s vs %s", retry.cmd.CommandID, hung.cmd.CommandID)
		}
		if a.ready() {
			t.Error("/readyz says ready while nats-server is hung")
		}
		if err := prov.NATS.Resume(); err != nil {
			t.Fatal(err)
		}
		c := settled("the command sent during the hang applied", hung.cmd.CommandID, "applied")
		if c.Status != "accepted" || c.FailedAt != nil {
			t.Errorf("command sent during the hang: %+v, want accepted and never failed", c)
		}
		once("command sent during the hang and retried", hung.cmd.CommandID)
	} else {
		t.Log("SIGSTOP step skipped: set RXC_NATS_SERVER_BIN (make test does) to run nats-server as a process")
	}

	// PostgreSQL stopped: nothing is recorded, the answer says so.
	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	pg := issue(t, a.client, id, "stop", "fault-stop-pg")
	if pg.status != 503 || pg.code != "database_unavailable" || pg.retry == "" {
		t.Errorf("command with PostgreSQL stopped: %d %q Retry-After %q; want 503 database_unavailable", pg.status, pg.code, pg.retry)
	}
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "API back after PostgreSQL returned", func() bool {
		st, _, err := b.client.Do("GET", "/api/sensors/"+id, nil, "")
		return err == nil && st == 200
	})
	for _, cv := range b.history(id) {
		if cv.IdempotencyKey != nil && *cv.IdempotencyKey == "fault-stop-pg" {
			t.Errorf("a command refused with PostgreSQL stopped was recorded: %+v", cv)
		}
	}

	// Agent stopped: accepted, not acknowledged until it returns; then
	// applied once.
	if code := runs[len(runs)-1].stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	queued := issue(t, b.client, id, "stop", "fault-stop-agent-down")
	if queued.status != 202 || queued.cmd.Status != "accepted" {
		t.Errorf("command with the agent stopped: %d %+v, want 202 accepted", queued.status, queued.cmd)
	}
	if c := b.commandOf(id, queued.cmd.CommandID); c.Outcome != nil || c.AcknowledgedAt != nil {
		t.Errorf("command to a stopped agent shown acknowledged: %+v", c)
	}
	runs = append(runs, startAgent(t, agentArgs(a, stateDir)...))
	settled("the queued command applied after the agent returned", queued.cmd.CommandID, "applied")
	once("command queued while the agent was down", queued.cmd.CommandID)

	// Revoked through the other replica: the agent (talking to A) is
	// refused everywhere and stops.
	b.must("POST", "/api/sensors/"+id+"/revoke", nil, 200, nil)
	if code := runs[len(runs)-1].exit(t, 30*time.Second); code != 1 {
		t.Errorf("agent exit %d after revocation through B, want 1", code)
	}

	// Nothing anywhere is both failed and acknowledged.
	for _, cv := range b.history(id) {
		if cv.FailedAt != nil && (cv.Outcome != nil || cv.AcknowledgedAt != nil) {
			t.Errorf("command both failed and acknowledged: %+v", cv)
		}
	}
}

func (p *plane) ready() bool {
	st, _, err := p.client.Do("GET", "/readyz", nil, "")
	return err == nil && st == http.StatusNoContent
}

func (p *plane) history(sensorID string) []commandView {
	p.t.Helper()
	var page struct{ Items []commandView }
	p.must("GET", "/api/sensors/"+sensorID+"/commands?limit=200", nil, 200, &page)
	return page.Items
}
