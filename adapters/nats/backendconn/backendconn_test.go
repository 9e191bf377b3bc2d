package backendconn

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

func TestRedial(t *testing.T) {
	t.Parallel()
	base := 100 * time.Millisecond
	tests := []struct {
		failures int
		min, max time.Duration
	}{
		{0, base / 2, base},
		{1, base, 2 * base},
		{4, 8 * base, 16 * base},
		{5, 8 * base, 16 * base},
		{1000, 8 * base, 16 * base},
	}
	for _, tt := range tests {
		for range 200 {
			if got := redial(base).Delay(tt.failures); got < tt.min || got > tt.max {
				t.Fatalf("redial(%v).Delay(%d) = %v, want within [%v, %v]", base, tt.failures, got, tt.min, tt.max)
			}
		}
	}
}

func TestCheckCredsNeverEchoes(t *testing.T) {
	t.Parallel()
	acct, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	upub, _ := user.PublicKey()
	tok, err := jwt.NewUserClaims(upub).Encode(acct)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	good, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "SUAMARKERSECRET"
	tests := []struct {
		name, creds, wantErr string
	}{
		{"good", string(good), ""},
		{"garbage", "hello " + marker, "no valid user JWT"},
		{"JWT that does not decode", strings.Replace(string(good), tok, "eyJ"+marker+".x.y", 1), "no valid user JWT"},
		{"no seed", strings.Replace(string(good), string(seed), marker, 1), "no user seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkCreds(tt.creds)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkCreds = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkCreds = %v, want an error saying %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("error echoes the creds content: %v", err)
			}
		})
	}
}
