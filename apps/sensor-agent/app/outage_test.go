package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// OutageEnv sets the PostgreSQL outage of TestOutageLosesNoOutcome (a Go
// duration). make test runs it with the default; make test-long with 10m.
const OutageEnv = "RXC_PG_OUTAGE"

const (
	defaultOutage   = 8 * time.Second
	outageCommands  = 100
	restartAfterCmd = 40
)

func outageLength(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(OutageEnv)
	if v == "" {
		return defaultOutage
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", OutageEnv, v)
	}
	return d
}

// received counts the "command received" records the agents of runs
// logged, by command id: deliveries, repeats included.
func received(runs []*agent) map[string]int {
	n := map[string]int{}
	for _, a := range runs {
		for _, rec := range a.log.lines(0) {
			if msg, _ := rec["msg"].(string); msg == "command received" {
				id, _ := rec["command_id"].(string)
				n[id]++
			}
		}
	}
	return n
}

// TestOutageLosesNoOutcome: 100 commands reach the reference agent while
// the control plane's PostgreSQL is down (RXC_PG_OUTAGE, default a few
// seconds; make test-long: 10 minutes) and the agent is restarted in the
// middle of applying them. When PostgreSQL returns, every command is
// recorded with the outcome the agent reported, each was applied exactly
// once, and the agent's outbox ends with nothing unconfirmed. With a fixed
// window of results (the agent before the outbox kept its latest 8) all but
// 8 would stay "accepted" with no outcome.
func TestOutageLosesNoOutcome(t *testing.T) {
	outage := outageLength(t)
	p, cluster, first, stateDir, id := stoppedAgentOwnPostgres(t, nil)

	// The commands wait in the sensor's consumer while the agent is down.
	cmds := make([]string, outageCommands)
	for i := range cmds {
		action := []string{"start", "stop"}[i%2]
		var c struct{ CommandID, Status string }
		p.must("POST", "/api/sensors/"+id+"/commands", map[string]string{"action": action}, 202, &c)
		if c.Status != "accepted" {
			t.Fatalf("command %d: status %q, want accepted", i, c.Status)
		}
		cmds[i] = c.CommandID
	}

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	t.Logf("PostgreSQL stopped for %s", outage)
	runs := []*agent{first, startAgent(t, agentArgs(p, stateDir)...)}
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d commands delivered before the restart", restartAfterCmd), func() bool {
		return len(received(runs)) >= restartAfterCmd
	})
	if code := runs[1].stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	restartedAt := time.Since(down)
	runs = append(runs, startAgent(t, agentArgs(p, stateDir)...))
	waitUntil(t, 2*time.Minute, "every command delivered", func() bool {
		got := received(runs)
		for _, c := range cmds {
			if got[c] == 0 {
				return false
			}
		}
		return true
	})
	// PostgreSQL stays down until every command was applied, and at least
	// for the outage asked for.
	t.Logf("agent restarted %s into the outage; all %d commands received after %s", restartedAt.Round(time.Millisecond), len(cmds), time.Since(down).Round(time.Millisecond))
	time.Sleep(time.Until(down.Add(outage))) // the outage under test
	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	var history []commandView
	waitUntil(t, 3*time.Minute, "every command recorded with its outcome", func() bool {
		status, _, err := p.client.Do("GET", "/api/sensors/"+id, nil, "")
		if err != nil || status != 200 {
			return false
		}
		var page struct{ Items []commandView }
		if err := p.client.Call("GET", "/api/sensors/"+id+"/commands?limit=200", nil, "", 200, &page); err != nil {
			return false
		}
		history = page.Items
		recorded := 0
		for _, c := range history {
			if c.Outcome != nil {
				recorded++
			}
		}
		return recorded >= len(cmds)
	})
	t.Logf("PostgreSQL was down %s; all %d outcomes recorded %s after it returned", back.Sub(down).Round(time.Millisecond), len(cmds), time.Since(back).Round(time.Millisecond))
	byID := map[string]commandView{}
	for _, c := range history {
		byID[c.CommandID] = c
	}
	for i, cid := range cmds {
		c, ok := byID[cid]
		switch {
		case !ok:
			t.Errorf("command %d (%s) missing from the history", i, cid)
		case c.Outcome == nil || *c.Outcome != "applied" || c.Status != "accepted" || c.AcknowledgedAt == nil || c.FailedAt != nil:
			t.Errorf("command %d (%s): %+v, want accepted and applied", i, cid, c)
		}
		if d, n := applied(runs, cid); n != 1 {
			t.Errorf("command %d (%s) delivered %d times, applied %d times; want applied once", i, cid, d, n)
		}
	}

	// The agent learns that every result is recorded and keeps them only
	// as ids until the commands expire.
	last := runs[len(runs)-1]
	waitUntil(t, 60*time.Second, "the outbox confirmed", func() bool {
		data, err := os.ReadFile(filepath.Join(stateDir, sensorclient.ResultsFile))
		if err != nil {
			return false
		}
		var entries []struct {
			CommandID   string
			ConfirmedAt *time.Time
		}
		if json.Unmarshal(data, &entries) != nil {
			return false
		}
		for _, e := range entries {
			if e.ConfirmedAt == nil {
				return false
			}
		}
		return true
	})
	if code := last.stop(t); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
}
