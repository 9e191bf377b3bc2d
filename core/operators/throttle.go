package operators

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ThrottlePolicy says how failed logins slow further attempts. Failures
// are counted three ways: per account and client address together (the
// pair), per account from every address, and per address over every
// account. From a key's threshold on, every failure holds that key back for
// a delay that doubles with each further failure, up to MaxDelay. A
// held-back attempt is answered at once, without hashing. Counts are kept in
// the store, so every replica sees them, and forgotten after Window without
// failures.
//
// The pair threshold is the low one: whoever mistypes or guesses one
// account's password from one place is slowed soon. The account threshold
// catches guessing one account from many addresses. The address threshold
// is a ceiling against spraying many accounts from one address; it is high
// (500 by default) because a corporate proxy or NAT puts every operator of
// an organisation behind one address, and their typos must not lock each
// other out. Failures of other accounts from an address never hold back a
// different account from that address below the ceiling.
type ThrottlePolicy struct {
	PairFailures    int           // failures of one account from one address before delays (default 5)
	AccountFailures int           // failures of one account from any address before delays (default 20)
	AddressFailures int           // failures from one address over all accounts before delays (default 500)
	BaseDelay       time.Duration // first delay (default 1s)
	MaxDelay        time.Duration // longest delay (default 15m)
	Window          time.Duration // a count is forgotten after this without failures (default 1h)
}

// DefaultThrottle is the policy used where ThrottlePolicy fields are zero.
var DefaultThrottle = ThrottlePolicy{PairFailures: 5, AccountFailures: 20, AddressFailures: 500, BaseDelay: time.Second, MaxDelay: 15 * time.Minute, Window: time.Hour}

func (p ThrottlePolicy) withDefaults() ThrottlePolicy {
	d := DefaultThrottle
	d.PairFailures = positiveOr(p.PairFailures, d.PairFailures)
	d.AccountFailures = positiveOr(p.AccountFailures, d.AccountFailures)
	d.AddressFailures = positiveOr(p.AddressFailures, d.AddressFailures)
	d.BaseDelay = positiveOr(p.BaseDelay, d.BaseDelay)
	d.MaxDelay = positiveOr(p.MaxDelay, d.MaxDelay)
	d.Window = positiveOr(p.Window, d.Window)
	return d
}

// positiveOr is v where it is positive, else def: a zero or negative
// setting takes the default.
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// delay is how long a key is held back after its count-th failure.
func (p ThrottlePolicy) delay(count, threshold int) time.Duration {
	if count < threshold {
		return 0
	}
	d := p.BaseDelay
	for i := threshold; i < count && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// ThrottleStore keeps failed-login counts and holds.
type ThrottleStore interface {
	// LoginLockedUntil returns the latest hold over keys (zero when none).
	LoginLockedUntil(ctx context.Context, keys []string) (time.Time, error)
	// RecordLoginFailure counts a failure of key at now, starting a new
	// count when the last failure is older than window, and holds key until
	// now + hold(count). It returns the count.
	RecordLoginFailure(ctx context.Context, key string, now time.Time, window time.Duration, hold func(count int) time.Duration) (int, error)
	// ResetLoginFailures forgets key's failures (after a successful login).
	ResetLoginFailures(ctx context.Context, key string) error
	// PurgeLoginFailures forgets counts whose last failure is before t and
	// whose hold has ended.
	PurgeLoginFailures(ctx context.Context, before time.Time) (int, error)
}

// throttleKey is one counter of failed logins and the threshold from
// which its failures hold it back.
type throttleKey struct {
	key       string
	threshold int
	// reset: a successful login forgets this count (the account's and the
	// pair's; never the address's, or one success behind a proxy would
	// clear a spray from it).
	reset bool
}

// throttleKeys are the keys a login of email from address counts on: the
// account, and with an address the pair and the address.
func (s *Service) throttleKeys(email, address string) []throttleKey {
	acct := strings.ToLower(strings.TrimSpace(email))
	if len(acct) > maxEmail {
		acct = acct[:maxEmail]
	}
	keys := []throttleKey{{key: "account:" + acct, threshold: s.throttle.AccountFailures, reset: true}}
	if address != "" {
		keys = append(keys,
			throttleKey{key: "pair:" + address + " " + acct, threshold: s.throttle.PairFailures, reset: true},
			throttleKey{key: "address:" + address, threshold: s.throttle.AddressFailures})
	}
	return keys
}

func (s *Service) checkThrottle(ctx context.Context, keys []throttleKey) error {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	until, err := s.store.LoginLockedUntil(ctx, names)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if wait := until.Sub(s.now()); wait > 0 {
		return &ThrottledError{RetryAfter: wait}
	}
	return nil
}

func (s *Service) recordFailure(ctx context.Context, keys []throttleKey) error {
	for _, k := range keys {
		n, err := s.store.RecordLoginFailure(ctx, k.key, s.now(), s.throttle.Window, func(count int) time.Duration {
			return s.throttle.delay(count, k.threshold)
		})
		if err != nil {
			return fmt.Errorf("login: record failure: %w", err)
		}
		if n == k.threshold {
			s.log.WarnContext(ctx, "login throttled after repeated failures", "key_kind", strings.SplitN(k.key, ":", 2)[0], "failures", n)
		}
	}
	return nil
}

// resetFailures forgets the account's and the pair's counts after a
// success.
func (s *Service) resetFailures(ctx context.Context, keys []throttleKey) error {
	for _, k := range keys {
		if !k.reset {
			continue
		}
		if err := s.store.ResetLoginFailures(ctx, k.key); err != nil {
			return fmt.Errorf("login: %w", err)
		}
	}
	return nil
}

// PurgeLoginFailures forgets failure counts older than the window whose
// hold has ended (housekeeping next to the session purge).
func (s *Service) PurgeLoginFailures(ctx context.Context) (int, error) {
	n, err := s.store.PurgeLoginFailures(ctx, s.now().Add(-s.throttle.Window))
	if err != nil {
		return 0, fmt.Errorf("purge login failures: %w", err)
	}
	return n, nil
}
