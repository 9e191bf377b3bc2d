package app_test

import (
	"encoding/json"
	"fmt"
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
// 500 (of the windows 1–500, 501–1000, …) and the largest account JWT;
// RXC_REVOKE_BOUND sets ACCOUNT_JWT_MAX_BYTES (default: the provisioner's).
//
// Each revocation of the history alternates with one in a control tenant
// that starts afresh every 500, as the history's first 500 did: the
// control's mean in the same window is what the window would cost without
// the history, on the machine as loaded then (a shared machine's load
// moves more than the list's cost does within minutes). The report gives
// the last 500 against the control of their window too, and the highest
// such ratio of any window.
// Run it once: go test -run - -bench RevokeHistory -benchtime 1x.
func BenchmarkRevokeHistory(b *testing.B) {
	total := 12000
	if n, err := strconv.Atoi(os.Getenv("RXC_REVOKE_HISTORY")); err == nil && n >= 1000 {
		total = n
	}
	bound := 0 // the provisioner's default
	if n, err := strconv.Atoi(os.Getenv("RXC_REVOKE_BOUND")); err == nil {
		bound = n
	}
	for range b.N {
		s := provisionertest.Start(b, provisionertest.Options{AccountJWTMaxBytes: bound})
		tenant := func(id string) string {
			status, body := s.Post("/accounts", map[string]string{"tenantId": id})
			if status != 201 {
				b.Fatalf("%d %s", status, body)
			}
			var acct struct{ AccountPubKey string }
			if err := json.Unmarshal(body, &acct); err != nil {
				b.Fatal(err)
			}
			return acct.AccountPubKey
		}
		revoke := func(account string) (time.Duration, int) {
			kp, err := nkeys.CreateUser()
			if err != nil {
				b.Fatal(err)
			}
			pub, _ := kp.PublicKey()
			start := time.Now()
			status, body := s.Post("/revoke", map[string]string{"accountId": account, "userPubKey": pub})
			took := time.Since(start)
			if status != 200 {
				b.Fatalf("revocation in %s: %d %s", account, status, body)
			}
			var rr struct{ AccountJWT string }
			if err := json.Unmarshal(body, &rr); err != nil {
				b.Fatal(err)
			}
			return took, len(rr.AccountJWT)
		}
		history := tenant("bench")
		var control string
		var first, last, lastControl, window, windowControl, peak time.Duration
		worst := 0.0
		largest := 0
		for i := range total {
			if i%500 == 0 {
				control = tenant(fmt.Sprintf("control%d", i/500))
			}
			took, size := revoke(history)
			tookControl, _ := revoke(control)
			largest = max(largest, size)
			switch {
			case i < 500:
				first += took
			case i >= total-500:
				last += took
				lastControl += tookControl
			}
			window += took
			windowControl += tookControl
			if (i+1)%500 == 0 {
				peak = max(peak, window)
				ratio := float64(window) / float64(windowControl)
				worst = max(worst, ratio)
				// Every window, not b.Logf (which keeps ten lines).
				fmt.Printf("revocations %5d-%5d: %6.2f ms each, control %6.2f ms (%.2fx), account JWT %7d B\n",
					i-498, i+1, float64(window.Microseconds())/500/1000, float64(windowControl.Microseconds())/500/1000, ratio, size)
				window, windowControl = 0, 0
			}
		}
		b.ReportMetric(float64(first.Microseconds())/500/1000, "ms/revoke-first500")
		b.ReportMetric(float64(last.Microseconds())/500/1000, "ms/revoke-last500")
		b.ReportMetric(float64(peak.Microseconds())/500/1000, "ms/revoke-slowest500")
		b.ReportMetric(float64(last)/float64(first), "x/last500-vs-first500")
		b.ReportMetric(float64(last)/float64(lastControl), "x/last500-vs-control")
		b.ReportMetric(worst, "x/worst500-vs-control")
		b.ReportMetric(float64(largest), "B/largest-jwt")
	}
}
