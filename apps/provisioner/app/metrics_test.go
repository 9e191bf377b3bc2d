package app_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

func scrape(t *testing.T, s *provisionertest.Stack) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// metricValue finds one sample line's value.
func metricValue(text, series string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestMetrics(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{})
	// Every (re)connection to NATS pushes the accounts not pushed yet: wait
	// for the first one before making acme, or acme may be pushed by it
	// (a late connection on a loaded machine) and not count as unpushed.
	for deadline := time.Now().Add(20 * time.Second); metricValue(scrape(t, s), "rxc_provisioner_nats_connected") != "1"; {
		if time.Now().After(deadline) {
			t.Fatal("provisioner not connected to NATS within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	getJWT(t, s.URL, u.AccountID)
	// One naming scheme for both services: rxc_<service>_<name>, counters in _total.
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(scrape(t, s), -1) {
		name, typ := m[1], m[2]
		switch {
		case strings.HasPrefix(name, "go_"), strings.HasPrefix(name, "process_"), strings.HasPrefix(name, "promhttp_"):
		case !strings.HasPrefix(name, "rxc_provisioner_"):
			t.Errorf("/metrics: %s is not rxc_provisioner_…", name)
		case typ == "counter" && !strings.HasSuffix(name, "_total"):
			t.Errorf("/metrics: the counter %s does not end in _total", name)
		}
	}
	want := map[string]string{
		"rxc_provisioner_accounts":             "3", // SYS, CONTROL, acme
		`rxc_provisioner_users{kind="sensor"}`: "1",
		// acme was never pushed (nats-servers fetch it when needed).
		"rxc_provisioner_unpushed_accounts":             "1",
		"rxc_provisioner_consumers_missing":             "0",
		"rxc_provisioner_consumers_offline":             "0",
		"rxc_provisioner_nats_nodes_lost":               "0",
		"rxc_provisioner_nats_connected":                "1",
		"rxc_provisioner_command_stream_consumers":      "1",
		"rxc_provisioner_command_stream_consumer_limit": "1e+06",
		"rxc_provisioner_command_stream_capped":         "0",
		"rxc_provisioner_command_stream_crowded":        "0",
	}
	deadline := time.Now().Add(20 * time.Second)
	var text string
	for {
		text = scrape(t, s)
		var wrong []string
		for series, v := range want {
			if got := metricValue(text, series); got != v {
				wrong = append(wrong, series+"="+got+" (want "+v+")")
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics not as expected within 20s: %s", strings.Join(wrong, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, series := range []string{
		`rxc_provisioner_http_request_duration_seconds_count{code="200",method="GET",route="resolver_account"}`,
		`rxc_provisioner_http_request_duration_seconds_count{code="201",method="POST",route="/users"}`,
	} {
		if metricValue(text, series) == "" {
			t.Errorf("no %s", series)
		}
	}
	if strings.Contains(text, u.AccountID) {
		t.Error("an account key became a label value")
	}

	s.StopNATS()
	deadline = time.Now().Add(30 * time.Second)
	for metricValue(scrape(t, s), "rxc_provisioner_nats_connected") != "0" {
		if time.Now().After(deadline) {
			t.Fatal("rxc_provisioner_nats_connected still 1 30s after nats-server stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
