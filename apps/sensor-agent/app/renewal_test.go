package app_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// answerDropper stands between the agent and the control plane and loses
// the answers of the first few renewals (or of the calls to route): the
// control plane receives and commits each one, then the agent's connection
// is cut before a byte of the answer reaches it.
type answerDropper struct {
	target *url.URL
	proxy  *httputil.ReverseProxy
	// route is the path suffix whose answers are lost ("" for
	// /agent/renew).
	route string

	mu      sync.Mutex
	drop    int      // renewals still to lose
	dropped []string // status of each lost answer, as the control plane gave it
}

func (d *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	route := d.route
	if route == "" {
		route = "/agent/renew"
	}
	lose := strings.HasSuffix(r.URL.Path, route) && d.drop > 0
	if lose {
		d.drop--
	}
	d.mu.Unlock()
	if !lose {
		d.proxy.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, d.target.JoinPath(r.URL.Path).String(), bytes.NewReader(body))
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	status := "error"
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.Status
	}
	d.mu.Lock()
	d.dropped = append(d.dropped, status)
	d.mu.Unlock()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func (d *answerDropper) lost() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dropped...)
}

// agentBehindDropper starts an agent that enrols as edge-1 and reaches p
// only through an answerDropper that loses the answers of the first two
// calls to route ("" for /agent/renew). It returns the dropper, the agent
// and the agent's state directory.
func agentBehindDropper(t *testing.T, p *plane, route string) (*answerDropper, *agent, string) {
	t.Helper()
	target, err := url.Parse(p.Base)
	if err != nil {
		t.Fatal(err)
	}
	dropper := &answerDropper{target: target, proxy: httputil.NewSingleHostReverseProxy(target), route: route, drop: 2}
	front := httptest.NewServer(dropper)
	t.Cleanup(front.Close)

	stateDir := filepath.Join(t.TempDir(), "sensor")
	args := agentArgs(p, stateDir, "--claim-code", p.claimCode("edge-1"))
	for i, a := range args {
		if a == p.Base {
			args[i] = front.URL + strings.TrimPrefix(p.Base, target.Scheme+"://"+target.Host)
		}
	}
	return dropper, startAgent(t, args...), stateDir
}

// TestRenewalSurvivesLostAnswers: the control plane commits a renewal (new
// certificate, the old token revoked) and the answer never arrives, twice.
// The agent sends the same request again from its journal and gets a
// certificate for it: it is not taken for revoked, keeps streaming on the
// new certificate, and renews normally afterwards.
func TestRenewalSurvivesLostAnswers(t *testing.T) {
	_, p := tenantPlane(t, provisionertest.Options{}, 9*time.Second)
	dropper, a, stateDir := agentBehindDropper(t, p, "")

	var id, first string
	waitUntil(t, 30*time.Second, "the sensor online", func() bool {
		for _, s := range p.sensors() {
			if s.State == "online" && s.Certificate != nil {
				id, first = s.ID, s.Certificate.Serial
			}
		}
		return id != ""
	})
	p.command(id, "start", "running")
	waitUntil(t, 40*time.Second, "two renewals committed whose answers were lost", func() bool { return len(dropper.lost()) >= 2 })
	for _, status := range dropper.lost() {
		if status != "200 OK" {
			t.Fatalf("the control plane answered a lost renewal with %s, want 200 OK (committed)", status)
		}
	}
	waitUntil(t, 30*time.Second, "the agent renewed after losing two answers", func() bool {
		return a.log.has(0, "certificate renewed", map[string]string{"sensor_id": id})
	})
	from := a.log.len()
	waitUntil(t, 20*time.Second, "events after the renewal", func() bool { return a.eventsSince(id, from) })
	dir, err := sensorclient.OpenStateDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := dir.Load(); err != nil || st.RevokedAt != nil || a.log.has(0, "sensor revoked", nil) {
		t.Fatalf("a lost renewal answer was taken for a revocation (state %v):\n%s", err, a.log.String())
	}
	// The agent holds what the control plane holds, and renews again on it.
	waitUntil(t, 30*time.Second, "a later, ordinary renewal", func() bool {
		st, err := dir.Load()
		c := p.sensor(id).Certificate
		return err == nil && c != nil && c.Serial == st.Serial && c.Serial != first && strings.Count(a.log.String(), `"certificate renewed"`) >= 2
	})
	if v := p.sensor(id); v.State != "running" {
		t.Errorf("sensor state %s after the renewals, want running", v.State)
	}
}

// TestEnrolmentSurvivesLostAnswers: the control plane commits an enrolment
// (certificate, the enrolment token used) and the answer never arrives,
// twice. The agent sends the same request again (its key and CSR are kept
// next to the redemption) with a fresh proof and is answered again: it
// ends enrolled on the one active certificate and runs, where it used to
// get invalid_token and stop for good.
func TestEnrolmentSurvivesLostAnswers(t *testing.T) {
	_, p := tenantPlane(t, provisionertest.Options{}, time.Hour)
	dropper, a, stateDir := agentBehindDropper(t, p, "/agent/enroll")
	var id string
	waitUntil(t, 30*time.Second, "the sensor online", func() bool {
		for _, s := range p.sensors() {
			if s.State == "online" && s.Certificate != nil {
				id = s.ID
			}
		}
		return id != ""
	})
	lost := dropper.lost()
	if len(lost) != 2 {
		t.Fatalf("%d enrolment answers lost, want 2", len(lost))
	}
	for _, status := range lost {
		if status != "201 Created" {
			t.Fatalf("the control plane answered a lost enrolment with %s, want 201 Created (committed)", status)
		}
	}
	dir, err := sensorclient.OpenStateDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c := p.sensor(id).Certificate; c == nil || c.Serial != st.Serial {
		t.Fatalf("the agent holds certificate %s, the control plane's active one is %+v", st.Serial, c)
	}
	if _, err := dir.LoadRedemption(); err == nil {
		t.Error("the redemption is still on disk after the enrolment")
	}
	p.command(id, "start", "running")
	from := a.log.len()
	waitUntil(t, 20*time.Second, "events from the enrolled sensor", func() bool { return a.eventsSince(id, from) })
}
