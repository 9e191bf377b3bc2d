package app_test

import (
	"strings"
	"testing"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// A sensor beyond COMMAND_STREAM_MAX_CONSUMERS is refused with its own
// stable code and no invitation to retry; the sensors that have their
// consumer keep getting their credentials.
func TestFullCommandStreamIsNotAnOutage(t *testing.T) {
	s := provisionertest.Start(t, provisionertest.Options{CommandStreamMaxConsumers: 2})
	account(t, s, "acme")
	first := sensorUser(t, s, "acme", "s1")
	sensorUser(t, s, "acme", "s2")

	status, hdr, body := s.Request("POST", "/users", map[string]string{"tenantId": "acme", "sensorId": "s3"})
	if status != 409 || !strings.Contains(string(body), `"code":"consumer_limit_reached"`) ||
		hdr.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("POST /users beyond the limit: %d %s %s, want 409 consumer_limit_reached", status, hdr.Get("Content-Type"), body)
	}
	if ra := hdr.Get("Retry-After"); ra != "" {
		t.Fatalf("Retry-After %q on a refusal that retrying does not cure", ra)
	}
	again := sensorUser(t, s, "acme", "s1")
	if again.UserPubKey != first.UserPubKey {
		t.Fatalf("the first sensor got another user when the stream was full")
	}
}
