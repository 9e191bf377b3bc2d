package controlapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/httpapi/edgetest"
)

// fuzzSensorRoute feeds arbitrary bodies to one public sensor route: the
// API must never answer 5xx, must answer errors as problem documents with a
// code, and must answer everything else with JSON.
func fuzzSensorRoute(f *testing.F, e *env, path, token string, seeds []string) {
	f.Helper()
	for _, s := range append(seeds, ``, `{`, `[]`, `null`, `"x"`, `{"a":1}`, `{} {}`, "\x00", `{"csr":null}`, `{"claimCode":{}}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		if err := edgetest.CheckAnswer(rec); err != nil {
			t.Fatalf("POST %s %q: %v", path, body, err)
		}
	})
}

func fuzzEnv(f *testing.F) *env {
	return newEnv(f, options{provisioning: true, api: func(c *controlapi.Config) {
		// The fuzzer redeems far more often than any client may.
		c.RedeemRate = controlapi.RateLimit{PerMinute: 1 << 30, Burst: 1 << 30}
	}})
}

func FuzzRedeem(f *testing.F) {
	fuzzSensorRoute(f, fuzzEnv(f), "/api/sensors/claim/redeem", "", []string{
		`{"claimCode":"7K3M-Q9ZD-7K3M-Q9ZD-7K3M-Q9ZD-7K3M"}`,
		`{"claimCode":"7k3mq9zd7k3mq9zd7k3mq9zd7k3m","hostname":"edge"}`,
		`{"claimCode":"x","hostname":"\u0000"}`,
	})
}

// fuzzAgentRoute fuzzes one of a sensor's own routes (enroll, renew) with
// the token of an acme sensor that sensor brought as far as the route
// needs, seeded with a good CSR and badCSR.
func fuzzAgentRoute(f *testing.F, route string, sensor func(e *env, tenant string) (id, token string), badCSR string) {
	e := fuzzEnv(f)
	e.createTenant("acme")
	id, token := sensor(e, "acme")
	fuzzSensorRoute(f, e, "/api/sensors/"+id+"/agent/"+route, token, []string{
		jsonString(f, map[string]string{"csr": newCSR(f)}),
		badCSR,
	})
}

func FuzzEnroll(f *testing.F) {
	fuzzAgentRoute(f, "enroll", (*env).redeem, `{"csr":"-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----"}`)
}

func FuzzRenew(f *testing.F) {
	fuzzAgentRoute(f, "renew", (*env).enroll, `{"csr":"-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----"}`)
}
