package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/pgtest"
	sensorpb "github.com/rxc-project/rxc/proto"
)

// TestDatabaseOutageAnswers503 stops the control plane's PostgreSQL: every
// route that needs it answers 503 database_unavailable with Retry-After
// (never 500), gRPC answers Unavailable with the same reason, liveness
// stays up, readiness fails, and everything works again once PostgreSQL is
// back.
func TestDatabaseOutageAnswers503(t *testing.T) {
	cluster := pgtest.Own(t)
	prov := provisionertest.Start(t, provisionertest.Options{})
	p := startPlane(t, prov, func(c *app.ServeConfig) { c.PGDSN = cluster.DSN("postgres") })
	p.login()
	p.provisionedTenant("acme", "Acme")
	s := p.enrol("acme")
	cc := p.grpcConn(s)
	health := sensorpb.NewSensorHealthcheckServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := health.Check(ctx, &sensorpb.CheckRequest{}); err != nil {
		t.Fatalf("health check before the outage: %v", err)
	}

	if err := cluster.Halt(); err != nil {
		t.Fatal(err)
	}
	routes := []struct{ method, path, bearer string }{
		{"POST", "/api/auth/login", ""},
		{"GET", "/api/auth/me", ""},
		{"GET", "/api/tenants", ""},
		{"POST", "/api/tenants", ""},
		{"GET", "/api/tenants/acme", ""},
		{"POST", "/api/tenants/acme/claim-codes", ""},
		{"GET", "/api/tenants/acme/claim-codes", ""},
		{"DELETE", "/api/claim-codes/c1", ""},
		{"GET", "/api/sensors", ""},
		{"GET", "/api/sensors?tenantId=acme&sort=-lastSeen&q=x", ""},
		{"GET", "/api/sensors/summary", ""},
		{"POST", "/api/commands", ""},
		{"GET", "/api/commands/batches/b1", ""},
		{"GET", "/api/sensors/" + s.enr.SensorID, ""},
		{"POST", "/api/sensors/" + s.enr.SensorID + "/commands", ""},
		{"POST", "/api/sensors/" + s.enr.SensorID + "/revoke", ""},
		{"GET", "/api/analytics/overview?tenantId=acme", ""},
		{"POST", "/api/sensors/claim/redeem", ""},
		{"POST", "/api/sensors/" + s.enr.SensorID + "/agent/renew", s.enr.SensorToken},
	}
	bodies := map[string]any{
		"/api/auth/login":                                 map[string]string{"email": opEmail, "password": opPassword},
		"/api/tenants":                                    map[string]string{"id": "beta", "name": "Beta"},
		"/api/tenants/acme/claim-codes":                   map[string]any{},
		"/api/sensors/claim/redeem":                       map[string]string{"claimCode": "7K3M-Q9ZD-7K3M-Q9ZD-7K3M-Q9ZD-7K3M"},
		"/api/sensors/" + s.enr.SensorID + "/commands":    map[string]string{"action": "start"},
		"/api/commands":                                   map[string]any{"action": "stop", "sensorIds": []string{s.enr.SensorID}},
		"/api/sensors/" + s.enr.SensorID + "/agent/renew": map[string]string{"csr": newCSR(t, s.key)},
	}
	for _, r := range routes {
		var body any
		if r.method != "GET" && r.method != "DELETE" {
			body = bodies[r.path]
			if body == nil {
				body = map[string]any{}
			}
		}
		resp, err := p.client.Send(r.method, r.path, body, r.bearer, nil)
		if err != nil {
			t.Fatal(err)
		}
		var prob struct{ Code string }
		_ = json.Unmarshal(resp.Body, &prob)
		if resp.Status != http.StatusServiceUnavailable || prob.Code != "database_unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with PostgreSQL down: %d %q (Retry-After %q), want 503 database_unavailable with Retry-After: %s",
				r.method, r.path, resp.Status, prob.Code, resp.Header.Get("Retry-After"), resp.Body)
		}
	}
	if st, _ := p.do("GET", "/healthz", nil, ""); st != http.StatusNoContent {
		t.Errorf("/healthz with PostgreSQL down: %d, want 204 (liveness checks no dependency)", st)
	}
	if st, _ := p.do("GET", "/readyz", nil, ""); st != http.StatusServiceUnavailable {
		t.Errorf("/readyz with PostgreSQL down: %d, want 503", st)
	}
	_, err := health.Check(ctx, &sensorpb.CheckRequest{})
	if status.Code(err) != codes.Unavailable || grpcmtls.Reason(err) != "database_unavailable" {
		t.Errorf("gRPC Check with PostgreSQL down: %v (reason %q), want Unavailable database_unavailable", err, grpcmtls.Reason(err))
	}
	stream, err := sensorpb.NewSensorEventStreamServiceClient(cc).StreamEvents(ctx)
	if err == nil {
		_, err = stream.CloseAndRecv()
	}
	if status.Code(err) != codes.Unavailable || grpcmtls.Reason(err) != "database_unavailable" {
		t.Errorf("gRPC StreamEvents with PostgreSQL down: %v (reason %q), want Unavailable database_unavailable", err, grpcmtls.Reason(err))
	}

	if err := cluster.Resume(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "API back after PostgreSQL returned", func() bool {
		st, _ := p.do("GET", "/api/sensors/"+s.enr.SensorID, nil, "")
		return st == http.StatusOK
	})
	if _, err := health.Check(ctx, &sensorpb.CheckRequest{}); err != nil {
		t.Fatalf("health check after the outage: %v", err)
	}
	waitUntil(t, 30*time.Second, "/readyz back", func() bool {
		st, _ := p.do("GET", "/readyz", nil, "")
		return st == http.StatusNoContent
	})
}
