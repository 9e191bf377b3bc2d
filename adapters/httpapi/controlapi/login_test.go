package controlapi_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
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

// TestLoginThrottling: five wrong passwords hold the account back with 429
// and Retry-After — even for the right password — for a delay that grows
// with each further failure; the hold ends on time; unknown accounts are
// held back the same way; one address guessing many accounts is held back
// too. Failures are counted in /metrics.
func TestLoginThrottling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	login := func(email, password string) response {
		return e.do(request{method: "POST", path: "/api/auth/login", body: loginBody(email, password)})
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

	// One address spraying accounts: held after 20 failures.
	// 12 failures above came from this address already (held-back
	// attempts do not count); the 20th holds the address.
	for i := range 8 {
		login(fmt.Sprintf("spray%d@example.com", i), "guess").expect(t, "spray", http.StatusUnauthorized, "invalid_credentials")
	}
	login("fresh@example.com", "guess").expect(t, "address held", http.StatusTooManyRequests, "login_throttled")

	res = e.metrics()
	if want := "rxc_login_failures_total 2"; !strings.Contains(string(res.body), want) {
		t.Errorf("/metrics lacks %s…: %s", want, res.body)
	}
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
	statuses := make([]int, n)
	retry := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := v.do(request{method: "POST", path: "/api/auth/login", body: loginBody(fmt.Sprintf("user%d@example.com", i), "not the password"),
				header: map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d, 203.0.113.%d", i%250, i%250)}})
			statuses[i], retry[i] = res.status, res.header.Get("Retry-After")
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	count := map[int]int{}
	for i, s := range statuses {
		count[s]++
		if s == http.StatusServiceUnavailable && retry[i] == "" {
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
