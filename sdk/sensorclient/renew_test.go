package sensorclient

import (
	"testing"
	"time"
)

func TestRenewAtIsAroundTwoThirdsOfTheLifetime(t *testing.T) {
	t.Parallel()
	obtained := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		lifetime time.Duration
	}{
		{"default week", 168 * time.Hour},
		{"one hour", time.Hour},
		{"short test certificate", 8 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			notAfter := obtained.Add(tc.lifetime)
			latest := obtained.Add(tc.lifetime * 2 / 3)
			earliest := latest.Add(-tc.lifetime / 10)
			if got := renewAt(obtained, notAfter, 0); !got.Equal(latest) {
				t.Errorf("without jitter: %s, want %s", got, latest)
			}
			if got := renewAt(obtained, notAfter, 0.999999); got.Before(earliest) || got.After(latest) {
				t.Errorf("with full jitter: %s, want within [%s, %s]", got, earliest, latest)
			}
			for range 100 {
				if got := RenewAt(obtained, notAfter); got.Before(earliest) || got.After(latest) {
					t.Fatalf("RenewAt = %s, want within [%s, %s]", got, earliest, latest)
				}
			}
		})
	}
	if got := RenewAt(obtained, obtained.Add(-time.Hour)); !got.Equal(obtained) {
		t.Errorf("expired certificate: RenewAt = %s, want at once (%s)", got, obtained)
	}
}

func TestRenewalDueCountsFromWhenTheCertificateArrived(t *testing.T) {
	t.Parallel()
	now := time.Now()
	// The CA backdates NotBefore; only ObtainedAt matters.
	st := &State{ObtainedAt: now.Add(-50 * time.Minute), NotAfter: now.Add(10 * time.Minute)}
	if due := st.RenewalDue(now); due.After(now) {
		t.Errorf("50 of 60 minutes gone: due %s, want already due", due)
	}
	st = &State{ObtainedAt: now, NotAfter: now.Add(time.Hour)}
	if due := st.RenewalDue(now); due.Before(now.Add(34*time.Minute)) || due.After(now.Add(40*time.Minute)) {
		t.Errorf("fresh one-hour certificate: due in %s, want 34–40 min", due.Sub(now))
	}
	st = &State{NotAfter: now.Add(time.Hour)}
	if due := st.RenewalDue(now); !due.After(now) {
		t.Errorf("state without ObtainedAt: due %s, want in the future", due)
	}
}
