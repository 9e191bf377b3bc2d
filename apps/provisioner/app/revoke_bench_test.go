package app_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// BenchmarkRevokeHistory measures POST /revoke as a tenant's history grows:
// RXC_REVOKE_HISTORY revocations (default 12,000) of distinct keys in one
// tenant, end to end (PostgreSQL, signing, the push to nats-server), and
// reports the mean of the first 500, of the last 500 and of the slowest
// 500 (of the windows 1–500, 501–1000, …) and the largest account JWT. Run it once: go test -run - -bench RevokeHistory -benchtime 1x.
func BenchmarkRevokeHistory(b *testing.B) {
	total := 12000
	if n, err := strconv.Atoi(os.Getenv("RXC_REVOKE_HISTORY")); err == nil && n >= 1000 {
		total = n
	}
	for range b.N {
		s := provisionertest.Start(b, provisionertest.Options{})
		status, body := s.Post("/accounts", map[string]string{"tenantId": "bench"})
		if status != 201 {
			b.Fatalf("%d %s", status, body)
		}
		var acct struct{ AccountPubKey string }
		if err := json.Unmarshal(body, &acct); err != nil {
			b.Fatal(err)
		}
		var first, last, window, peak time.Duration
		largest := 0
		for i := range total {
			kp, err := nkeys.CreateUser()
			if err != nil {
				b.Fatal(err)
			}
			pub, _ := kp.PublicKey()
			start := time.Now()
			status, body := s.Post("/revoke", map[string]string{"accountId": acct.AccountPubKey, "userPubKey": pub})
			took := time.Since(start)
			if status != 200 {
				b.Fatalf("revocation %d: %d %s", i, status, body)
			}
			var rr struct{ AccountJWT string }
			if err := json.Unmarshal(body, &rr); err != nil {
				b.Fatal(err)
			}
			largest = max(largest, len(rr.AccountJWT))
			switch {
			case i < 500:
				first += took
			case i >= total-500:
				last += took
			}
			window += took
			if (i+1)%500 == 0 {
				peak = max(peak, window)
				window = 0
			}
		}
		b.ReportMetric(float64(first.Microseconds())/500/1000, "ms/revoke-first500")
		b.ReportMetric(float64(last.Microseconds())/500/1000, "ms/revoke-last500")
		b.ReportMetric(float64(peak.Microseconds())/500/1000, "ms/revoke-slowest500")
		b.ReportMetric(float64(largest), "B/largest-jwt")
	}
}
