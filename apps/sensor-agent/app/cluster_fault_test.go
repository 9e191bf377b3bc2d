package app_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rxc-project/rxc/apps/controlplane/controlplanetest"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/natstest"
)

// consumersOn counts the sensor consumers (of the command stream) node holds
// as a replica or leader, from its /jsz.
func consumersOn(node *natstest.Server, account string) int {
	var jsz server.JSInfo
	if err := node.Monitor("/jsz?acc="+account+"&streams=true&consumers=true", &jsz); err != nil {
		return -1
	}
	n := 0
	for _, a := range jsz.AccountDetails {
		for _, st := range a.Streams {
			if st.Name != "RXC_CMD" {
				continue
			}
			for _, c := range st.Consumer {
				if c != nil && strings.HasPrefix(c.Name, "cmd-") {
					n++
				}
			}
		}
	}
	return n
}

// TestClusterNodeLoss runs the shipped cluster shape (three nats-servers,
// a limits-retention command stream of three replicas, each sensor's
// consumer of one: COMMAND_CONSUMER_REPLICAS=1) under real agents and kills
// a node twice: while sensors enrol, and in the middle of a command to every
// sensor, each time the node holding the most sensor consumers. Every sensor
// enrols, every command is applied exactly once (a recreated consumer
// delivers the sensor's earlier commands again: the agent skips them), and
// every sensor gets its command within 30 s of the loss. A command the
// stream could not store while it had no leader is answered 503 and sent
// again by the test, as an operator would: no accepted command is lost.
//
// RXC_NODE_LOSS_SENSORS runs it with more sensors than its 12 (one agent
// process), the waits that scale with the fleet lengthened to match; the
// 30 s bound after the loss does not scale. (At 2,000 on 2 shared cores
// a third of the sensors did not enrol within its wait: the 2,000-sensor
// node loss is measured by bench/cluster -pull instead.)
func TestClusterNodeLoss(t *testing.T) {
	sensors := 12
	if v := os.Getenv("RXC_NODE_LOSS_SENSORS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("RXC_NODE_LOSS_SENSORS=%q: want a number of sensors, at least 3", v)
		}
		sensors = n
	}
	// fleet is a wait that grows with the sensors: per a sensor beyond 12.
	fleet := func(base, per time.Duration) time.Duration { return base + time.Duration(max(0, sensors-12))*per }
	prov := provisionertest.Start(t, provisionertest.Options{ClusterNodes: 3, ConsumerReplicas: 1, CommandStreamRetention: "limits"})
	// nats-server 2.11 left the command stream without a leader for more
	// than 30 s after the second kill (its publishes answered "no response
	// from stream"), and places a new R1 consumer on the lost node until it
	// marks that node offline: the shape's node-loss guarantees are
	// measured from 2.15 (go.mod's) on. The serveradmin cluster tests run on
	// both.
	if v, err := prov.NATS.Version(); err == nil && (strings.HasPrefix(v, "2.11.") || strings.HasPrefix(v, "2.10.")) {
		t.Skipf("nats-server %s: the node-loss timings need 2.15 or later (docs/operations.md, \"Cluster shape\")", v)
	}
	cpCfg := agentPlaneConfig(t, prov)
	if sensors > 12 {
		// One agent process redeems every claim code from one address.
		cpCfg.RedeemPerMinute, cpCfg.RedeemBurst = 60*sensors, sensors
	}
	cp := startPlane(t, cpCfg)
	cp.setUpTenant()
	ctl := prov.Operator.ControlAccount

	busiest := func() int {
		best, most := -1, -1
		for i, n := range prov.Nodes {
			if !n.Running() {
				continue
			}
			if c := consumersOn(n, ctl); c > most {
				best, most = i, c
			}
		}
		return best
	}

	// Enrolment, a node lost once a third of the sensors are enrolled.
	var codes []string
	for i := range sensors {
		codes = append(codes, cp.claimCode(fmt.Sprintf("edge-%d", i+1)))
	}
	dir := t.TempDir()
	codesFile := filepath.Join(dir, "codes.txt")
	if err := os.WriteFile(codesFile, []byte(strings.Join(codes, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := startAgent(t, agentArgs(cp, filepath.Join(dir, "state"), "--count", fmt.Sprint(sensors), "--claim-codes-file", codesFile)...)
	runs := []*agent{run}
	online := func() []string {
		var ids []string
		for _, s := range allSensors(cp) {
			if s.State == "online" {
				ids = append(ids, s.ID)
			}
		}
		return ids
	}
	waitUntil(t, fleet(60*time.Second, 50*time.Millisecond), "a third of the sensors enrolled", func() bool { return len(online()) >= sensors/3 })
	lost := busiest()
	t.Logf("enrolment: killing nats-%d (%d sensor consumers)", lost+1, consumersOn(prov.Nodes[lost], ctl))
	prov.Nodes[lost].Kill()
	var ids []string
	// Enrolment retries with the agents' back-off (up to 30 s) behind the
	// control plane's circuit breaker; nats-server before 2.15 may place a
	// new consumer on the lost node, which the provisioner then recreates.
	waitUntil(t, fleet(120*time.Second, 100*time.Millisecond), "every sensor enrolled and online with a node lost", func() bool {
		ids = online()
		return len(ids) == sensors
	})
	prov.Nodes[lost].Start()

	// A command to every sensor, applied once each.
	accepted := map[string]time.Time{} // command id → when the API accepted it
	fanOut := func(action string, midway func()) map[string]string {
		t.Helper()
		cmds := map[string]string{}
		for i, id := range ids {
			if i == len(ids)/2 && midway != nil {
				midway()
			}
			// A command the stream did not store (no stream leader for a
			// few seconds after a node loss) is answered 503 and recorded
			// failed: the operator sends a new one.
			var a answer
			attempt := 0
			waitUntil(t, 30*time.Second, "command accepted for "+id, func() bool {
				attempt++
				a = issue(t, cp.client, id, action, fmt.Sprintf("%s-%s-%d", action, id, attempt))
				return a.status == 202
			})
			cmds[id] = a.cmd.CommandID
			accepted[a.cmd.CommandID] = time.Now()
		}
		return cmds
	}
	// settle waits until every command is applied, each within `within` of
	// its acceptance.
	settle := func(what string, cmds map[string]string, within time.Duration) {
		t.Helper()
		for id, cmdID := range cmds {
			waitUntil(t, time.Until(accepted[cmdID].Add(within)), what+": sensor "+id+" applied "+cmdID, func() bool {
				c := cp.commandOf(id, cmdID)
				return c.Outcome != nil && *c.Outcome == "applied"
			})
		}
	}
	start := fanOut("start", nil)
	settle("start", start, fleet(60*time.Second, 20*time.Millisecond))

	// The second fan-out loses the busiest node half-way.
	var killedAt time.Time
	stop := fanOut("stop", func() {
		lost = busiest()
		t.Logf("fan-out: killing nats-%d (%d sensor consumers)", lost+1, consumersOn(prov.Nodes[lost], ctl))
		prov.Nodes[lost].Kill()
		killedAt = time.Now()
	})
	settle("stop after a node loss", stop, 30*time.Second)
	t.Logf("every sensor applied its command %s after the node loss", time.Since(killedAt).Round(time.Millisecond))
	// The provisioner's metrics say what happened: consumers recreated,
	// none left to recreate, the node still down named lost.
	waitUntil(t, 10*time.Second, "the provisioner's metrics after the repair", func() bool {
		m := provMetrics(t, prov.URL)
		recreated, _ := strconv.ParseFloat(m["rxc_provisioner_consumers_recreated_total"], 64)
		return recreated > 0 && m["rxc_provisioner_consumers_offline"] == "0" && m["rxc_provisioner_nats_nodes_lost"] == "1"
	})

	// Nothing applied twice, and no start delivered again after the stop
	// was applied: every sensor is stopped.
	redelivered := 0
	for _, cmds := range []map[string]string{start, stop} {
		for _, cmdID := range cmds {
			d, n := applied(runs, cmdID)
			if n != 1 {
				t.Errorf("command %s delivered %d times, applied %d times; want applied once", cmdID, d, n)
			}
			redelivered += d - 1
		}
	}
	// The lost node's consumers were recreated and delivered their
	// sensors' start again: the dedupe was exercised, not assumed.
	if redelivered == 0 {
		t.Error("no command was delivered twice: no consumer was recreated, the node loss tested nothing")
	}
	t.Logf("%d deliveries of commands already applied, none applied again", redelivered)
	for _, id := range ids {
		if v := cp.sensor(id); v.State != "stopped" {
			t.Errorf("sensor %s is %s after its stop, want stopped", id, v.State)
		}
	}
}

// provMetrics reads the provisioner's /metrics samples without labels.
func provMetrics(t *testing.T, url string) map[string]string {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// allSensors lists the tenant's sensors, every page (plane.sensors reads
// the first, 50).
func allSensors(cp *plane) []controlplanetest.SensorView {
	cp.t.Helper()
	var out []controlplanetest.SensorView
	cursor := ""
	for {
		var page struct {
			Items      []controlplanetest.SensorView
			NextCursor *string
		}
		path := "/api/sensors?limit=200&tenantId=" + tenantID
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		cp.must("GET", path, nil, 200, &page)
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out
		}
		cursor = *page.NextCursor
	}
}
