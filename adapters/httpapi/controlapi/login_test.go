package controlapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/passwords"
	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/core/operators"
)

func loginBody(email, password string) string {
	return fmt.Sprintf(`{"email":%q,"password":%q}`, email, password)
}

// TestLoginThrottling: five wrong passwords from one address hold the
// account back there with 429 and Retry-After — even for the right
// password — for a delay that grows with each further failure; the hold
// ends on time; unknown accounts are held back the same way. Failures are
// counted in /metrics.
func TestLoginThrottling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	failures := 0
	login := func(email, password string) response {
		res := e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(email, password)})
		if res.status == http.StatusUnauthorized || res.status == http.StatusTooManyRequests {
			failures++
		}
		return res
	}
	for i := range 5 {
		login(operatorEmail, "wrong password "+strconv.Itoa(i)).expect(t, "wrong password", http.StatusUnauthorized, "invalid_credentials")
	}
	res := login(operatorEmail, operatorPassword)
	res.expect(t, "right password while held", http.StatusTooManyRequests, "login_throttled")
	if ra, _ := strconv.Atoi(res.header.Get("Retry-After")); ra < 1 || ra > 2 {
		t.Errorf("Retry-After %q, want about 1 s after the fifth failure", res.header.Get("Retry-After"))
	}
	e.clock.Advance(2 * time.Second)
	login(operatorEmail, "wrong again").expect(t, "sixth failure", http.StatusUnauthorized, "invalid_credentials")
	res = login(operatorEmail, operatorPassword)
	res.expect(t, "held longer", http.StatusTooManyRequests, "login_throttled")
	if ra, _ := strconv.Atoi(res.header.Get("Retry-After")); ra < 2 {
		t.Errorf("Retry-After %q after the sixth failure, want a longer hold (≥ 2 s)", res.header.Get("Retry-After"))
	}
	e.clock.Advance(3 * time.Second)
	login(operatorEmail, operatorPassword).expect(t, "after the hold", http.StatusNoContent, "")
	// Success forgets the account's count.
	login(operatorEmail, "one slip").expect(t, "slip", http.StatusUnauthorized, "invalid_credentials")
	login(operatorEmail, operatorPassword).expect(t, "after one slip", http.StatusNoContent, "")

	// Unknown accounts: the same answers.
	for range 5 {
		login("nobody@example.com", operatorPassword).expect(t, "unknown", http.StatusUnauthorized, "invalid_credentials")
	}
	login("nobody@example.com", operatorPassword).expect(t, "unknown, held", http.StatusTooManyRequests, "login_throttled")

	res = e.metrics()
	if want := fmt.Sprintf("rxc_controlplane_login_failures_total %d\n", failures); !strings.Contains(string(res.body), want) {
		t.Errorf("/metrics lacks %q: %s", want, res.body)
	}
}

// TestLoginFromASharedAddress is the lock-out measured in issue 24: 50
// failed logins of other accounts from one address (everyone behind one
// proxy or NAT), then the admin's correct password from that address signs
// in at once. The other half: 50 failures of one account from 50
// addresses hold that account back, from any address, on every replica
// (the counts live in PostgreSQL).
func TestLoginFromASharedAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{api: func(c *controlapi.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}})
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	for i := range 50 {
		e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(fmt.Sprintf("colleague%d@example.com", i), "a wrong password"), header: from("203.0.113.5")}).
			expect(t, "another account's failure", http.StatusUnauthorized, "invalid_credentials")
	}
	e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(operatorEmail, operatorPassword), header: from("203.0.113.5")}).
		expect(t, "the admin from the shared address after 50 failures of others", http.StatusNoContent, "")

	// A second replica: its own operators service and store over the same
	// database, as two control-plane processes are.
	store, err := controlplanestore.New(controlplanestore.Config{Pool: e.pool})
	if err != nil {
		t.Fatal(err)
	}
	hasher := fastHasher(t)
	ops, err := operators.New(operators.Config{Store: store, Hasher: hasher, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	replica := e.variant(t, func(c *controlapi.Config) { c.Operators = ops })

	held := -1
	for i := range 50 {
		srv := e
		if i%2 == 1 {
			srv = replica
		}
		res := srv.do(request{method: "POST", path: "/api/auth/login", body: loginBody(operatorEmail, "a wrong password"), header: from(fmt.Sprintf("198.51.100.%d", i+1))})
		if res.status == http.StatusTooManyRequests && held < 0 {
			held = i
		}
		if res.status != http.StatusUnauthorized && res.status != http.StatusTooManyRequests {
			t.Fatalf("guess %d: %d %s", i, res.status, res.body)
		}
	}
	if held < 0 {
		t.Fatal("50 failures of one account from 50 addresses never held it back")
	}
	t.Logf("the account was held back from guess %d on", held+1)
	for name, srv := range map[string]*env{"first replica": e, "second replica": replica} {
		srv.do(request{method: "POST", path: "/api/auth/login", body: loginBody(operatorEmail, operatorPassword), header: from("192.0.2.200")}).
			expect(t, name+": the right password from a fresh address while the account is held", http.StatusTooManyRequests, "login_throttled")
	}
	// Positive control: another account from that fresh address.
	if _, err := e.ops.CreateOperator(context.Background(), operators.NewOperator{Email: "other@example.com", Password: "another long passphrase", Role: operators.RoleViewer}); err != nil {
		t.Fatal(err)
	}
	replica.do(request{method: "POST", path: "/api/auth/login", body: loginBody("other@example.com", "another long passphrase"), header: from("192.0.2.200")}).
		expect(t, "another account from the fresh address", http.StatusNoContent, "")
}

// peakHasher is the production hasher, counting how many hashes run at once.
type peakHasher struct {
	*passwords.Hasher
	running, peak atomic.Int64
}

func (h *peakHasher) track() func() {
	n := h.running.Add(1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return func() { h.running.Add(-1) }
}

func (h *peakHasher) Hash(password string) (string, error) {
	defer h.track()()
	return h.Hasher.Hash(password)
}

func (h *peakHasher) Verify(hash, password string) (bool, error) {
	defer h.track()()
	return h.Hasher.Verify(hash, password)
}

// TestConcurrentWrongLoginsStayBounded: 200 concurrent wrong logins from
// 200 addresses (so throttling does not step in) with production argon2id
// (19 MiB a hash): at most MaxConcurrentHashes hashes run at once, the
// rest answer 503 login_busy with Retry-After, nothing answers 500, and
// the heap stays far below 300 MB.
func TestConcurrentWrongLoginsStayBounded(t *testing.T) {
	e := newEnv(t, options{api: func(c *controlapi.Config) { c.TrustProxy = true }})
	prod, err := passwords.New(passwords.Config{}) // production parameters
	if err != nil {
		t.Fatal(err)
	}
	hasher := &peakHasher{Hasher: prod}
	store, err := controlplanestore.New(controlplanestore.Config{Pool: e.pool})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := operators.New(operators.Config{Store: store, Hasher: hasher})
	if err != nil {
		t.Fatal(err)
	}
	v := e.variant(t, func(c *controlapi.Config) { c.Operators = ops })

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	const n = 200
	logins := atOnce(n, func(i int) response {
		return v.do(request{method: "POST", path: "/api/auth/login", body: loginBody(fmt.Sprintf("user%d@example.com", i), "not the password"),
			header: map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d, 203.0.113.%d", i%250, i%250)}})
	})
	close(stop)
	<-sampled
	count := map[int]int{}
	for _, res := range logins {
		count[res.status]++
		if res.status == http.StatusServiceUnavailable && res.header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	if count[http.StatusInternalServerError] > 0 || count[http.StatusUnauthorized]+count[http.StatusServiceUnavailable]+count[http.StatusTooManyRequests] != n {
		t.Errorf("answers %v, want only 401 invalid_credentials, 503 login_busy and 429", count)
	}
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("answers %v; heap in use grew by %d MiB at peak (base %d MiB)", count, grew>>20, base.HeapInuse>>20)
	if peak.Load() > 300<<20 {
		t.Errorf("heap in use peaked at %d MiB, want under 300 MiB", peak.Load()>>20)
	}
	if p := hasher.peak.Load(); p > operators.DefaultMaxConcurrentHashes || p < 1 {
		t.Errorf("%d password hashes ran at once, want at most %d", p, operators.DefaultMaxConcurrentHashes)
	}
}
