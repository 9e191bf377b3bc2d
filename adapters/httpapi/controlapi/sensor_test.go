package controlapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/core/fleet"
)

func redeemRequest(code string, header map[string]string) request {
	return request{method: "POST", path: "/api/sensors/claim/redeem", body: fmt.Sprintf(`{"claimCode":%q}`, code), header: header}
}

// TestInvalidClaimCodesLookAlike: unknown, expired, used, revoked and
// malformed codes get byte-identical answers, so a guesser learns nothing.
func TestInvalidClaimCodesLookAlike(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.createTenant("acme")

	unknown, err := fleet.NewClaimCode()
	if err != nil {
		t.Fatal(err)
	}
	_, expired := e.claimCode("acme", `{"ttlSeconds":60}`)
	_, used := e.claimCode("acme", "")
	e.do(redeemRequest(used, nil)).expect(t, "first use", http.StatusCreated, "")
	revokedID, revoked := e.claimCode("acme", "")
	e.do(request{method: "DELETE", path: "/api/claim-codes/" + revokedID, operator: true}).expect(t, "revoke code", http.StatusNoContent, "")
	e.clock.Advance(61 * time.Second)

	codes := []struct{ name, code string }{
		{"unknown", unknown}, {"expired", expired}, {"used", used}, {"revoked", revoked},
		{"malformed", "not-a-code"}, {"empty", ""},
	}
	var first response
	for i, c := range codes {
		res := e.do(redeemRequest(c.code, nil))
		res.expect(t, c.name, http.StatusBadRequest, "invalid_claim_code")
		if i == 0 {
			first = res
			continue
		}
		if diff := cmp.Diff(string(first.body), string(res.body)); diff != "" {
			t.Errorf("%s code answered unlike an unknown one (-unknown +%s):\n%s", c.name, c.name, diff)
		}
	}
}

// TestRedeemRateLimit: the burst passes, the next attempt gets 429 with
// Retry-After, and a token returns after 60/PerMinute seconds.
func TestRedeemRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		trustProxy bool
		// proxies are TrustedProxies (the test's peer is 127.0.0.1).
		proxies []netip.Prefix
		// wantOtherAddressPasses: a request with another X-Forwarded-For
		// address is limited separately only when the proxy is trusted.
		wantOtherAddressPasses bool
	}{
		{"direct", false, nil, false},
		{"behind a trusted proxy", true, nil, true},
		{"the peer is in TRUSTED_PROXIES", false, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, true},
		{"the peer is not in TRUSTED_PROXIES", false, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false},
		{"TRUSTED_PROXIES overrides TRUST_PROXY", true, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false},
	}
	base := newEnv(t, options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := base.variant(t, func(c *controlapi.Config) {
				c.RedeemRate = controlapi.RateLimit{PerMinute: 6, Burst: 3}
				c.TrustProxy = tc.trustProxy
				c.TrustedProxies = tc.proxies
			})
			client := map[string]string{"X-Forwarded-For": "198.51.100.7, 203.0.113.9"}
			for i := range 3 {
				e.do(redeemRequest("bad", client)).expect(t, fmt.Sprintf("attempt %d", i+1), http.StatusBadRequest, "invalid_claim_code")
			}
			res := e.do(redeemRequest("bad", client))
			res.expect(t, "attempt past the burst", http.StatusTooManyRequests, "rate_limited")
			if got := res.header.Get("Retry-After"); got != "10" {
				t.Errorf("Retry-After %q, want 10 (one attempt per 10 s)", got)
			}

			other := e.do(redeemRequest("bad", map[string]string{"X-Forwarded-For": "203.0.113.10"}))
			if passed := other.status != http.StatusTooManyRequests; passed != tc.wantOtherAddressPasses {
				t.Errorf("another forwarded address: %d, want passed=%v", other.status, tc.wantOtherAddressPasses)
			}

			e.clock.Advance(9 * time.Second)
			e.do(redeemRequest("bad", client)).expect(t, "9 s later", http.StatusTooManyRequests, "rate_limited")
			e.clock.Advance(time.Second)
			e.do(redeemRequest("bad", client)).expect(t, "10 s later", http.StatusBadRequest, "invalid_claim_code")
			e.do(redeemRequest("bad", client)).expect(t, "the token is spent", http.StatusTooManyRequests, "rate_limited")
		})
	}
}

// TestCommandFailures: commands that cannot leave are refused with a
// problem that says why.
func TestCommandFailures(t *testing.T) {
	t.Parallel()
	base := newEnv(t, options{})
	base.createTenant("acme")
	id, _ := base.enroll("acme")
	command := request{method: "POST", path: "/api/sensors/" + id + "/commands", body: `{"action":"stop"}`, operator: true}

	disabled := base.variant(t, func(c *controlapi.Config) { c.MessagingEnabled = false })
	res := disabled.do(command)
	res.expect(t, "command with messaging disabled", http.StatusServiceUnavailable, "messaging_disabled")
	if !strings.Contains(string(res.body), "disabled") {
		t.Errorf("detail does not say messaging is disabled: %s", res.body)
	}
	var s struct {
		LastCommand *struct {
			Action   string
			FailedAt *string
		}
	}
	if err := json.Unmarshal(base.do(request{method: "GET", path: "/api/sensors/" + id, operator: true}).body, &s); err != nil || s.LastCommand != nil {
		t.Errorf("a command was recorded with messaging disabled: %+v", s.LastCommand)
	}

	base.pub.Fail(fmt.Errorf("sensorbus: not connected: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrNotPublished))
	base.do(command).expect(t, "command with NATS unreachable", http.StatusServiceUnavailable, "nats_unavailable")
	if err := json.Unmarshal(base.do(request{method: "GET", path: "/api/sensors/" + id, operator: true}).body, &s); err != nil ||
		s.LastCommand == nil || s.LastCommand.Action != "stop" || s.LastCommand.FailedAt == nil {
		t.Errorf("sensor after a failed command: %+v; want lastCommand stop with failedAt", s.LastCommand)
	}
	if n := len(base.pub.Messages()); n != 0 {
		t.Errorf("%d messages published, want none", n)
	}
}

// TestEnrollProvisioner: enrolment waits for the tenant's NATS account and
// a reachable provisioner, and a refusal leaves the token usable.
func TestEnrollProvisioner(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{provisioning: true})
	e.do(request{method: "POST", path: "/api/tenants", body: `{"id":"acme"}`, operator: true}).expect(t, "create tenant", http.StatusCreated, "")
	id, token := e.redeem("acme")
	enrol := func() response {
		return e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
			header: map[string]string{"Authorization": "Bearer " + token}})
	}
	res := enrol()
	res.expect(t, "tenant without account", http.StatusServiceUnavailable, "tenant_not_provisioned")
	if res.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if _, err := e.fleet.ReconcileTenants(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		err       error
		wantCode  string
		wantRetry string
	}{
		{"provisioner down", fmt.Errorf("provisioner: %w", fleet.ErrProvisionerUnavailable), "provisioner_unavailable", "5"},
		// Another refusal wraps ErrNotFound: it must not read as an unknown
		// sensor.
		{"provisioner refuses", fmt.Errorf("provisioner: account_not_found: %w", fleet.ErrNotFound), "provisioner_unavailable", "5"},
		// The provisioner's tenant_has_no_account keeps its meaning across
		// the hop (provisionerclient types it): the tenant is not ready yet.
		{"provisioner lacks the tenant's account", fmt.Errorf("provisioner: tenant_has_no_account: %w", fleet.ErrTenantNotProvisioned), "tenant_not_provisioned", "30"},
	} {
		e.prov.Fail(nil, c.err, nil)
		res := enrol()
		res.expect(t, c.name, http.StatusServiceUnavailable, c.wantCode)
		if got := res.header.Get("Retry-After"); got != c.wantRetry {
			t.Errorf("%s: Retry-After %q, want %q", c.name, got, c.wantRetry)
		}
	}
	e.prov.Fail(nil, nil, nil)
	enrol().expect(t, "provisioner back", http.StatusCreated, "")
}

func TestEnrollWithoutProvisioning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{provisioning: false})
	e.createTenant("acme")
	id, token := e.redeem("acme")
	res := e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: jsonString(t, map[string]string{"csr": newCSR(t)}),
		header: map[string]string{"Authorization": "Bearer " + token}})
	res.expect(t, "enroll", http.StatusCreated, "")
	m := res.object(t)
	if v, ok := m["nats"]; !ok || v != nil {
		t.Errorf("nats = %#v (present %v), want null", v, ok)
	}
	if diff := cmp.Diff(map[string]any{"address": publicGRPC}, m["grpc"]); diff != "" {
		t.Errorf("grpc (-want +got):\n%s", diff)
	}
}

// TestRevokePending: when the provisioner fails after the local revocation
// the answer says so, the sensor is revoked, and repeating finishes it.
func TestRevokePending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	id, _ := e.enroll("acme")
	e.prov.Fail(nil, nil, errors.Join(fleet.ErrProvisionerUnavailable, errors.New("circuit open")))
	res := e.do(request{method: "POST", path: "/api/sensors/" + id + "/revoke", operator: true})
	res.expect(t, "revoke", http.StatusServiceUnavailable, "nats_revoke_pending")
	if !strings.Contains(string(res.body), "revoked here") || !strings.Contains(string(res.body), "repeat") {
		t.Errorf("detail does not say the sensor is revoked locally and to repeat: %s", res.body)
	}
	var s struct{ State string }
	if err := json.Unmarshal(e.do(request{method: "GET", path: "/api/sensors/" + id, operator: true}).body, &s); err != nil || s.State != "revoked" {
		t.Errorf("state after a pending revocation: %q, want revoked", s.State)
	}
	if n := len(e.prov.Revocations()); n != 0 {
		t.Fatalf("%d NATS revocations recorded, want none yet", n)
	}
	e.prov.Fail(nil, nil, nil)
	e.do(request{method: "POST", path: "/api/sensors/" + id + "/revoke", operator: true}).expect(t, "repeat", http.StatusOK, "")
	if diff := cmp.Diff([][2]string{{"A-acme", "U-" + id}}, e.prov.Revocations()); diff != "" {
		t.Errorf("NATS revocations (-want +got):\n%s", diff)
	}
}

// TestCommandIdempotencyAndHistory: a repeat with the same Idempotency-Key
// returns the first command and publishes nothing; the key cannot be reused
// for another action; an unconfirmed publication is shown pending, never
// failed; the history pages newest first.
func TestCommandIdempotencyAndHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	e.createTenant("acme")
	id, _ := e.enroll("acme")
	path := "/api/sensors/" + id + "/commands"
	keyed := func(action, key string) response {
		return e.do(request{method: "POST", path: path, body: `{"action":"` + action + `"}`, operator: true, header: map[string]string{"Idempotency-Key": key}})
	}
	var first, again struct{ CommandID, Status, IdempotencyKey string }
	res := keyed("stop", "op-retry-1")
	e.clock.Advance(time.Second)
	if res.status != http.StatusAccepted || json.Unmarshal(res.body, &first) != nil || first.Status != "accepted" || first.IdempotencyKey != "op-retry-1" {
		t.Fatalf("first keyed command: %d %s", res.status, res.body)
	}
	for range 3 {
		res = keyed("stop", "op-retry-1")
		if res.status != http.StatusOK || json.Unmarshal(res.body, &again) != nil || again.CommandID != first.CommandID {
			t.Fatalf("repeat with the same key: %d %s; want 200 with command %s", res.status, res.body, first.CommandID)
		}
	}
	if n := len(e.pub.Messages()); n != 1 {
		t.Errorf("%d messages published for one key, want 1", n)
	}
	keyed("start", "op-retry-1").expect(t, "same key, other action", http.StatusConflict, "conflict")
	keyed("start", "bad key with spaces").expect(t, "malformed key", http.StatusBadRequest, "invalid_input")

	e.pub.Fail(fmt.Errorf("sensorbus: timeout: %w: %w", fleet.ErrMessagingUnavailable, fleet.ErrPublishUnknown))
	var pending struct{ CommandID, Status string }
	res = keyed("start", "op-retry-2")
	e.clock.Advance(time.Second)
	if res.status != http.StatusAccepted || json.Unmarshal(res.body, &pending) != nil || pending.Status != "pending" {
		t.Fatalf("command with an unconfirmed publication: %d %s; want 202 pending", res.status, res.body)
	}
	e.pub.Fail(nil)

	for i := range 3 {
		e.do(request{method: "POST", path: path, body: `{"action":"start"}`, operator: true}).expectStatus(t, fmt.Sprintf("command %d", i), http.StatusAccepted)
		e.clock.Advance(time.Second)
	}
	var all []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("history does not end")
		}
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		var page struct {
			Items []struct {
				CommandID string
				Status    string
			}
			NextCursor *string
		}
		res := e.do(request{method: "GET", path: path + q, operator: true})
		if res.status != http.StatusOK || json.Unmarshal(res.body, &page) != nil {
			t.Fatalf("history page: %d %s", res.status, res.body)
		}
		for _, it := range page.Items {
			all = append(all, it.CommandID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(all) != 5 || all[3] != pending.CommandID || all[4] != first.CommandID {
		t.Errorf("history %v: want 5 commands, newest first, ending with %s, %s", all, pending.CommandID, first.CommandID)
	}
	e.do(request{method: "GET", path: path + "?cursor=not-a-cursor", operator: true}).expect(t, "forged cursor", http.StatusBadRequest, "invalid_input")
	e.do(request{method: "GET", path: path + "?limit=0", operator: true}).expect(t, "limit 0", http.StatusBadRequest, "invalid_input")
	e.do(request{method: "GET", path: path}).expect(t, "history without a session", http.StatusUnauthorized, "unauthenticated")
}
