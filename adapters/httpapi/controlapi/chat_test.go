package controlapi_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore/eventseed"
	"github.com/rxc-project/rxc/core/operators"
)

// TestChatEndToEnd: the fake model's streamed answer is relayed; MISP hits
// become threat-intel chips; history counts only the asking tenant's
// events; a playbook mentioning the indicator is offered; private
// addresses are never looked up; the model gets all of it as context.
func TestChatEndToEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{intel: true, playbooks: true, ingestion: true, enrichmentTimeout: 5 * time.Second})
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	eventseed.Seed(t, w.events,
		eventseed.Event{Tenant: "acme", Sensor: "s1", Time: at(1), Src: knownIP, Dest: privateIP},
		eventseed.Event{Tenant: "acme", Sensor: "s1", Time: at(2), Src: privateIP, Dest: knownIP},
		eventseed.Event{Tenant: "acme", Sensor: "s1", Time: at(3), Src: knownIP, Dest: privateIP, CVEs: []string{log4shell}},
	)
	for i := range 5 {
		eventseed.Seed(t, w.events, eventseed.Event{Tenant: "other", Sensor: "s9", Time: at(10 + i), Src: knownIP, Dest: privateIP, CVEs: []string{log4shell}})
	}

	snap := snapshotWith(knownIP, unknownIP, privateIP)
	snap["cves"] = []map[string]any{{"id": log4shell, "count": 1, "lastSeen": at(3).Format(time.RFC3339)}}
	snap["topSignatures"] = []map[string]any{{"signatureId": 2001, "signature": "ET SCAN Nmap", "category": "Attempted Recon", "severity": 2, "count": 3}}
	question := "Who is scanning us?"
	res, evs := w.ask(map[string]any{"tenantId": "acme", "question": question, "snapshot": snap})
	if res.status != http.StatusOK {
		t.Fatalf("chat: %d %s", res.status, res.body)
	}
	chips, answer, final := summary(evs)
	wantChips := []string{
		"threatIntel " + knownIP + " Mass scanning campaign",
		"threatIntel " + log4shell + " Log4Shell exploitation wave",
		"historical " + knownIP + " Seen 3 times",
		"historical " + log4shell + " Seen once",
		"playbook " + knownIP + " Scanner triage",
	}
	if diff := cmp.Diff(wantChips, chips); diff != "" {
		t.Errorf("chips (-want +got):\n%s", diff)
	}
	if want := "The address " + knownIP + " belongs to a known scanner."; answer != want || final != "done "+model {
		t.Errorf("answer %q then %q; want %q then done", answer, final, want)
	}
	if evs[len(evs)-1].Event != "done" || evs[0].Event != "enrichment" {
		t.Errorf("event order: first %s, last %s", evs[0].Event, evs[len(evs)-1].Event)
	}
	searched := w.misp.Searched()
	slices.Sort(searched)
	if diff := cmp.Diff([]string{knownIP, unknownIP, log4shell}, searched); diff != "" {
		t.Errorf("MISP searches, private address never sent (-want +got):\n%s", diff)
	}
	reqs := w.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model requests: %d", len(reqs))
	}
	msgs := reqs[0].Messages
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" || msgs[1].Content != question {
		t.Fatalf("messages: %+v", msgs)
	}
	for _, want := range []string{"acme", "Mass scanning campaign", "seen 3 times", "Scanner triage", "ET SCAN Nmap", unknownIP, "untrusted"} {
		if !strings.Contains(msgs[0].Content, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if strings.Contains(msgs[0].Content, "s9") {
		t.Error("the system prompt mentions the other tenant's sensor")
	}
	w.noSecrets(t)
}

// TestChatWithoutChips: the answer still streams, and no chip appears, for
// an indicator MISP does not know, for a MISP that hangs past the
// enrichment timeout, and for a snapshot without indicators.
func TestChatWithoutChips(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		opts         worldOptions
		snapshot     map[string]any
		wantSearched []string
	}{
		{"no hit", worldOptions{intel: true, enrichmentTimeout: 5 * time.Second}, snapshotWith(unknownIP), []string{unknownIP}},
		{"lookup timeout", worldOptions{intel: true, mispHangs: true, enrichmentTimeout: 100 * time.Millisecond}, snapshotWith(knownIP), []string{knownIP}},
		{"no indicators", worldOptions{intel: true, enrichmentTimeout: 5 * time.Second}, map[string]any{
			"from": base.Format(time.RFC3339), "to": base.Add(time.Hour).Format(time.RFC3339),
			"topSources": []map[string]any{{"ip": privateIP, "count": 9}}, "text": "quiet night, 192.168.1.1 only",
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.opts)
			res, evs := w.ask(map[string]any{"tenantId": "acme", "question": "Anything to worry about?", "snapshot": tc.snapshot})
			if res.status != http.StatusOK {
				t.Fatalf("chat: %d %s", res.status, res.body)
			}
			chips, answer, final := summary(evs)
			if len(chips) != 0 {
				t.Errorf("chips: %v; want none", chips)
			}
			if answer == "" || final != "done "+model {
				t.Errorf("answer %q, final %q; want the model's answer and done", answer, final)
			}
			if diff := cmp.Diff(tc.wantSearched, w.misp.Searched()); diff != "" {
				t.Errorf("MISP searches (-want +got):\n%s", diff)
			}
			w.noSecrets(t)
		})
	}
}

func TestChatLimits(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{chatRate: controlapi.RateLimit{PerMinute: 600, Burst: 100}})
	ask := func(question string, snapshot any) response {
		res, _ := w.ask(map[string]any{"tenantId": "acme", "question": question, "snapshot": snapshot})
		return res
	}
	snap := snapshotWith(knownIP)
	if res := ask(strings.Repeat("é", 2000), snap); res.status != http.StatusOK {
		t.Errorf("2,000 characters: %d %s", res.status, res.body)
	}
	ask(strings.Repeat("é", 2001), snap).expect(t, "2,001 characters", http.StatusBadRequest, "invalid_input")
	ask("   ", snap).expect(t, "blank question", http.StatusBadRequest, "invalid_input")
	big := snapshotWith()
	big["text"] = strings.Repeat("x", 16<<10)
	ask("why?", big).expect(t, "snapshot over 16 KiB", http.StatusRequestEntityTooLarge, "snapshot_too_large")
	res, _ := w.ask(`{"tenantId":"acme","question":"` + strings.Repeat("a", 65<<10) + `"}`)
	res.expect(t, "body over 64 KiB", http.StatusRequestEntityTooLarge, "body_too_large")
	ask("why?", map[string]any{"view": "/sensors"}).expect(t, "unknown snapshot field", http.StatusBadRequest, "invalid_json")
	ask("why?", map[string]any{"from": "yesterday"}).expect(t, "snapshot time not RFC 3339", http.StatusBadRequest, "invalid_json")
	res, _ = w.ask(map[string]any{"tenantId": "nobody", "question": "why?", "snapshot": snap})
	res.expect(t, "unknown tenant", http.StatusNotFound, "not_found")
	res, _ = w.ask(map[string]any{"tenantId": "no such", "question": "why?", "snapshot": snap})
	res.expect(t, "malformed tenant", http.StatusBadRequest, "invalid_id")
	if res := w.do(request{method: "POST", path: "/api/analytics/chat", body: `{}`}); res.status != http.StatusUnauthorized {
		t.Errorf("chat without a session: %d", res.status)
	}
	w.noSecrets(t)
}

// TestChatRateLimit: an operator gets Burst questions, then 429 with
// Retry-After until the bucket refills; another operator is not affected.
func TestChatRateLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{chatRate: controlapi.RateLimit{PerMinute: 3, Burst: 3}})
	body := map[string]any{"tenantId": "acme", "question": "status?", "snapshot": snapshotWith()}
	for i := range 3 {
		if res, _ := w.ask(body); res.status != http.StatusOK {
			t.Fatalf("question %d: %d %s", i+1, res.status, res.body)
		}
	}
	res, _ := w.ask(body)
	res.expect(t, "fourth question in a minute", http.StatusTooManyRequests, "rate_limited")
	if ra := res.header.Get("Retry-After"); ra != "20" {
		t.Errorf("Retry-After %q; want 20", ra)
	}

	const second = "second@example.com"
	if _, err := w.ops.CreateOperator(context.Background(), operators.NewOperator{Email: second, Password: operatorPassword, Role: operators.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	login := w.do(request{method: "POST", path: "/api/auth/login", body: jsonString(t, map[string]string{"email": second, "password": operatorPassword})})
	var cookie string
	for _, c := range login.cookies {
		if c.Name == controlapi.SessionCookie {
			cookie = c.Name + "=" + c.Value
		}
	}
	res = w.do(request{method: "POST", path: "/api/analytics/chat", body: jsonString(t, body), header: map[string]string{"Cookie": cookie}})
	if cookie == "" || res.status != http.StatusOK {
		t.Errorf("another operator meanwhile: %d %s", res.status, res.body)
	}
	w.clock.Advance(20 * time.Second)
	if res, _ := w.ask(body); res.status != http.StatusOK {
		t.Errorf("after 20 s: %d %s", res.status, res.body)
	}
	res, _ = w.ask(body)
	res.expect(t, "right after", http.StatusTooManyRequests, "rate_limited")
}

// TestChatDisconnectCancelsModel: when the operator goes away mid-answer,
// the call to the model server is cancelled.
func TestChatDisconnectCancelsModel(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{answer: []string{"Thinking", "never sent"}})
	w.model.SetHang(true)
	req, err := http.NewRequest("POST", w.srv.URL+"/api/analytics/chat", strings.NewReader(jsonString(t, map[string]any{
		"tenantId": "acme", "question": "long answer please", "snapshot": snapshotWith(),
	})))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: controlapi.SessionCookie, Value: w.session})
	res, err := w.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && sc.Text() != `data: {"text":"Thinking"}` {
	}
	res.Body.Close()
	select {
	case <-w.model.Cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the model server's request was not cancelled after the client left")
	}
}

// TestChatModelFailures: a provider that fails mid-way gives an `error`
// event; one that is unreachable turns the chat off (status and 503).
func TestChatModelFailures(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	wantObject(t, "status while the model answers", w.get("/api/analytics/chat/status"), http.StatusOK, map[string]any{
		"enabled": true, "model": model, "capabilities": map[string]any{"threatIntel": false, "historicalEnrichment": false, "playbooks": false},
	})
	w.model.SetStatus(http.StatusInternalServerError)
	res, evs := w.ask(map[string]any{"tenantId": "acme", "question": "hello?", "snapshot": snapshotWith()})
	if res.status != http.StatusOK {
		t.Fatalf("chat: %d %s", res.status, res.body)
	}
	if _, answer, final := summary(evs); answer != "" || final != "error model_unavailable" {
		t.Errorf("answer %q, final %q; want an error event", answer, final)
	}

	// A configured key the provider refuses: the chat is off, and neither
	// the answers nor the logs show the key, although the provider quotes it.
	wrong := "sk-refused-key-1b2c3d4e5f"
	r := newWorld(t, worldOptions{modelKey: wrong})
	res = r.get("/api/analytics/chat/status")
	if obj := res.object(t); obj["enabled"] != false {
		t.Errorf("status with a refused key: %s", res.body)
	}
	res, _ = r.ask(map[string]any{"tenantId": "acme", "question": "hello?", "snapshot": snapshotWith()})
	res.expect(t, "chat with a refused key", http.StatusServiceUnavailable, "chat_unavailable")
	if !strings.Contains(r.logs.String(), "model provider unreachable") {
		t.Error("the refusal was not logged")
	}
	for _, text := range []string{r.logs.String(), r.seen.String()} {
		if strings.Contains(text, wrong) {
			t.Error("the refused key appears in a log line or an answer")
		}
	}
}
