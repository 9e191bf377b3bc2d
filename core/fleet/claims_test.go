package fleet_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
)

func TestIssueClaimCodeLifetime(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	tests := []struct {
		name    string
		tenant  string
		ttl     time.Duration
		want    time.Duration
		wantErr error
	}{
		{name: "default 24h", tenant: "acme", want: 24 * time.Hour},
		{name: "minimum", tenant: "acme", ttl: time.Minute, want: time.Minute},
		{name: "maximum", tenant: "acme", ttl: 30 * 24 * time.Hour, want: 30 * 24 * time.Hour},
		{name: "below minimum", tenant: "acme", ttl: 59 * time.Second, wantErr: fleet.ErrInvalidInput},
		{name: "above maximum", tenant: "acme", ttl: 31 * 24 * time.Hour, wantErr: fleet.ErrInvalidInput},
		{name: "negative", tenant: "acme", ttl: -time.Hour, wantErr: fleet.ErrInvalidInput},
		{name: "unknown tenant", tenant: "ghost", wantErr: fleet.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, code, err := f.svc.IssueClaimCode(f.ctx, tt.tenant, tt.ttl, "", "ops@example.com")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ExpiresAt.Sub(c.CreatedAt); got != tt.want {
				t.Errorf("lifetime %s, want %s", got, tt.want)
			}
			if _, err := fleet.NormalizeClaimCode(code); err != nil {
				t.Errorf("issued code %q does not parse: %v", code, err)
			}
		})
	}
}

func TestRedeemCreatesPendingSensor(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	tests := []struct {
		name, sensorName, hostname, wantName string
	}{
		{"named by the claim code", "edge-1", "host-a", "edge-1"},
		{"named after the host", "", "host-b", "host-b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			issued, code, err := f.svc.IssueClaimCode(f.ctx, "acme", 0, tt.sensorName, "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			r, err := f.svc.RedeemClaimCode(f.ctx, strings.ToLower(code), tt.hostname)
			if err != nil {
				t.Fatal(err)
			}
			if err := ids.Validate(r.SensorID); err != nil || !strings.HasPrefix(r.SensorID, "s-") {
				t.Errorf("sensor id %q: %v", r.SensorID, err)
			}
			if r.TenantID != "acme" || len(r.EnrollmentToken) < 43 || !r.ExpiresAt.Equal(f.clock.Now().Add(15*time.Minute)) {
				t.Errorf("redemption %+v", r)
			}
			got := f.sensor(t, r.SensorID)
			want := fleet.Sensor{ID: r.SensorID, TenantID: "acme", Name: tt.wantName, Hostname: tt.hostname, State: fleet.StatePending, CreatedAt: f.clock.Now()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sensor (-want +got):\n%s", diff)
			}
			list, _ := f.svc.ListClaimCodes(f.ctx, "acme")
			for _, c := range list {
				if c.ID == issued.ID && (c.SensorID != r.SensorID || !c.UsedAt.Equal(f.clock.Now())) {
					t.Errorf("claim code after redemption: %+v", c)
				}
			}
			if got := f.liveTokenHash(t, r.SensorID, fleet.TokenEnrollment); !bytes.Equal(got, sha(r.EnrollmentToken)) {
				t.Errorf("live enrolment token hash %x, want the SHA-256 of the token handed out", got)
			}
		})
	}
}

func TestRedeemRejectsUnusableCodesUniformly(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	issue := func(ttl time.Duration) (fleet.ClaimCode, string) {
		c, code, err := f.svc.IssueClaimCode(f.ctx, "acme", ttl, "", "ops@example.com")
		if err != nil {
			t.Fatal(err)
		}
		return c, code
	}
	_, used := issue(0)
	if _, err := f.svc.RedeemClaimCode(f.ctx, used, ""); err != nil {
		t.Fatal(err)
	}
	revokedCode, revoked := issue(0)
	if err := f.svc.RevokeClaimCode(f.ctx, revokedCode.ID); err != nil {
		t.Fatal(err)
	}
	_, expired := issue(time.Minute)
	f.clock.Advance(time.Minute)
	unknown, _ := fleet.NewClaimCode()

	cases := map[string]string{
		"unknown":   unknown,
		"malformed": "not-a-code",
		"empty":     "",
		"used":      used,
		"revoked":   revoked,
		"expired":   expired,
	}
	for name, code := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := f.svc.RedeemClaimCode(f.ctx, code, "h")
			if err != fleet.ErrInvalidClaimCode {
				t.Errorf("RedeemClaimCode error = %#v, want exactly ErrInvalidClaimCode", err)
			}
		})
	}
	if n := f.sensorCount(t); n != 1 {
		t.Errorf("%d sensors, want only the one from the first redemption", n)
	}
}

func TestRevokeClaimCode(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	c, code := f.issuedCode(t, "acme")
	usedC, usedCode := f.issuedCode(t, "acme")
	if _, err := f.svc.RedeemClaimCode(f.ctx, usedCode, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      string
		wantErr error
	}{
		{"unused", c.ID, nil},
		{"again", c.ID, nil},
		{"unknown", "00000000-0000-4000-8000-000000000000", fleet.ErrNotFound},
		{"already used", usedC.ID, fleet.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := f.svc.RevokeClaimCode(f.ctx, tt.id); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("RevokeClaimCode error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if _, err := f.svc.RedeemClaimCode(f.ctx, code, ""); err != fleet.ErrInvalidClaimCode {
		t.Errorf("redeeming a revoked code: %v", err)
	}
}

func TestRedeemConcurrentlyExactlyOnce(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	_, code := f.issuedCode(t, "acme")
	successes, others := race(50, fleet.ErrInvalidClaimCode, func() (bool, error) {
		_, err := f.svc.RedeemClaimCode(f.ctx, code, "h")
		return err == nil, err
	})
	if successes != 1 || len(others) != 0 {
		t.Fatalf("%d successes, unexpected errors %v; want exactly one success, the rest ErrInvalidClaimCode", successes, others)
	}
	if got := f.sensorCount(t); got != 1 {
		t.Errorf("%d sensors, want 1", got)
	}
}

// ClaimCode returns the record the API resolves a code's tenant from
// before anyone acts on it; never the code.
func TestClaimCodeRecord(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	issued, code, err := f.svc.IssueClaimCode(f.ctx, "acme", 0, "edge-1", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.ClaimCode(f.ctx, issued.ID)
	if err != nil || got.TenantID != "acme" || got.ID != issued.ID {
		t.Fatalf("ClaimCode = %+v, %v", got, err)
	}
	if diff := cmp.Diff(issued, got); diff != "" {
		t.Errorf("record (-issued +read):\n%s", diff)
	}
	normal, _ := fleet.NormalizeClaimCode(code)
	if strings.Contains(fmt.Sprintf("%+v", got), normal) {
		t.Errorf("the record carries the code: %+v", got)
	}
	_, err = f.svc.ClaimCode(f.ctx, "cc-unknown")
	wantErr(t, err, fleet.ErrNotFound)
	_, err = f.svc.ClaimCode(f.ctx, "../acme")
	wantErr(t, err, fleet.ErrInvalidInput)
	wantErr(t, f.svc.RevokeClaimCode(f.ctx, "cc-unknown"), fleet.ErrNotFound)
	_, err = f.svc.ListClaimCodes(f.ctx, "nobody")
	wantErr(t, err, fleet.ErrNotFound)
}
