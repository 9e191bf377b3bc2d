package operators

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ThrottlePolicy says how failed logins slow further attempts. Each account
// (by e-mail, known or not) and each client address counts its failures;
// from the threshold on, every failure holds that key back for a delay that
// doubles with each further failure, up to MaxDelay. A held-back attempt is
// answered at once, without hashing. Counts are kept in the store, so every
// replica sees them, and forgotten after Window without failures.
type ThrottlePolicy struct {
	AccountFailures int           // failures of one account before delays (default 5)
	AddressFailures int           // failures from one address before delays (default 20)
	BaseDelay       time.Duration // first delay (default 1s)
	MaxDelay        time.Duration // longest delay (default 15m)
	Window          time.Duration // a count is forgotten after this without failures (default 1h)
}

// DefaultThrottle is the policy used where ThrottlePolicy fields are zero.
var DefaultThrottle = ThrottlePolicy{AccountFailures: 5, AddressFailures: 20, BaseDelay: time.Second, MaxDelay: 15 * time.Minute, Window: time.Hour}

func (p ThrottlePolicy) withDefaults() ThrottlePolicy {
	d := DefaultThrottle
	if p.AccountFailures > 0 {
		d.AccountFailures = p.AccountFailures
	}
	if p.AddressFailures > 0 {
		d.AddressFailures = p.AddressFailures
	}
	if p.BaseDelay > 0 {
		d.BaseDelay = p.BaseDelay
	}
	if p.MaxDelay > 0 {
		d.MaxDelay = p.MaxDelay
	}
	if p.Window > 0 {
		d.Window = p.Window
	}
	return d
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

// throttleKeys are the account key (always first) and the address key.
func (s *Service) throttleKeys(email, address string) []string {
	acct := strings.ToLower(strings.TrimSpace(email))
	if len(acct) > maxEmail {
		acct = acct[:maxEmail]
	}
	keys := []string{"account:" + acct}
	if address != "" {
		keys = append(keys, "address:"+address)
	}
	return keys
}

func (s *Service) checkThrottle(ctx context.Context, keys []string) error {
	until, err := s.store.LoginLockedUntil(ctx, keys)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if wait := until.Sub(s.now()); wait > 0 {
		return &ThrottledError{RetryAfter: wait}
	}
	return nil
}

func (s *Service) recordFailure(ctx context.Context, keys []string) error {
	for i, k := range keys {
		threshold := s.throttle.AccountFailures
		if i > 0 {
			threshold = s.throttle.AddressFailures
		}
		n, err := s.store.RecordLoginFailure(ctx, k, s.now(), s.throttle.Window, func(count int) time.Duration {
			return s.throttle.delay(count, threshold)
		})
		if err != nil {
			return fmt.Errorf("login: record failure: %w", err)
		}
		if n == threshold {
			s.log.WarnContext(ctx, "login throttled after repeated failures", "key_kind", strings.SplitN(k, ":", 2)[0], "failures", n)
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
