package app_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// metric reads one sample from /metrics; -1 when absent.
func (p *plane) metric(name string) string {
	p.t.Helper()
	resp, err := http.Get(p.Metrics + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return "-1"
}

func TestBreakerOpensWhileProvisionerIsDownAndClosesAfter(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	p := startPlane(t, prov, func(c *app.ServeConfig) {
		c.Provisioner.BreakerFailures = 3
		c.Provisioner.BreakerOpenSeconds = 1
		c.Provisioner.TimeoutSeconds = 2
	})
	const breaker = `rxc_controlplane_provisioner_breaker_state{name="nats-provisioner"}`
	if got := p.metric(breaker); got != "0" {
		t.Fatalf("breaker at start: %s, want 0 (closed)", got)
	}
	p.login()

	prov.StopServe()
	p.must("POST", "/api/tenants", map[string]string{"id": "acme", "name": "Acme"}, "", 201, nil)
	waitUntil(t, 20*time.Second, "breaker open while the provisioner is down", func() bool { return p.metric(breaker) == "2" })

	prov.StartServe()
	var tenant struct{ NatsStatus string }
	waitUntil(t, 30*time.Second, "tenant provisioned after the provisioner returned", func() bool {
		p.must("GET", "/api/tenants/acme", nil, "", 200, &tenant)
		return tenant.NatsStatus == "provisioned"
	})
	if got := p.metric(breaker); got != "0" {
		t.Fatalf("breaker after recovery: %s, want 0 (closed)", got)
	}
}

func TestDisabledProvisioningMakesNoCalls(t *testing.T) {
	var calls atomic.Int64
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer counting.Close()
	prov := provisionertest.Start(t, provisionertest.Options{NoNATS: true})
	p := startPlane(t, prov, func(c *app.ServeConfig) {
		c.Provisioner.Enabled = false
		c.Provisioner.BaseURL = counting.URL
		c.Provisioner.IntervalSeconds = 5
		c.Messaging.Enabled = false
	})
	p.login()
	var tenant struct{ NatsStatus string }
	p.must("POST", "/api/tenants", map[string]string{"id": "acme", "name": "Acme"}, "", 201, &tenant)
	if tenant.NatsStatus != "pending" {
		t.Fatalf("natsStatus %q", tenant.NatsStatus)
	}
	// Enrolment still issues a certificate, without NATS credentials.
	var code struct{ Code string }
	p.must("POST", "/api/tenants/acme/claim-codes", map[string]any{}, "", 201, &code)
	var red struct{ SensorID, EnrollmentToken string }
	p.must("POST", "/api/sensors/claim/redeem", map[string]string{"claimCode": code.Code}, "", 201, &red)
	s := &testSensor{}
	s.key = mustKey(t)
	var enr map[string]any
	p.must("POST", "/api/sensors/"+red.SensorID+"/agent/enroll", map[string]string{"csr": newCSR(t, s.key)}, red.EnrollmentToken, 201, &enr)
	if enr["nats"] != nil || enr["certificate"] == "" {
		t.Fatalf("enrolment with provisioning disabled: nats=%v", enr["nats"])
	}
	status, body := p.do("POST", "/api/sensors/"+red.SensorID+"/commands", map[string]string{"action": "start"}, "")
	if status != 503 || !strings.Contains(string(body), "messaging") {
		t.Fatalf("command with messaging disabled: %d %s", status, body)
	}
	// Give a reconcile cycle the chance it must not take.
	time.Sleep(5500 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("disabled provisioning made %d calls", n)
	}
}
