package sensorclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// testCreds returns a user .creds file signed by a throwaway account.
func testCreds(t *testing.T) []byte {
	t.Helper()
	account, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	upub, _ := user.PublicKey()
	token, err := jwt.NewUserClaims(upub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func validCommandsConfig(t *testing.T) CommandsConfig {
	return CommandsConfig{
		TenantID: "acme", SensorID: "s-1", Creds: testCreds(t),
		NATS: NATSInfo{URL: "nats://127.0.0.1:1", Stream: "RXC_CMD", Consumer: "cmd-acme-s-1", JSAPIPrefix: "ctrl.API",
			InboxPrefix: "_INBOX_acme_s-1", CommandSubject: "rxc.acme.s-1.cmd", StatusSubject: "rxc.acme.s-1.status"},
		Handle: func(context.Context, Command) {},
	}
}

func TestNewCommandsChecksItsConfiguration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(c *CommandsConfig)
		want   string
	}{
		{"no sensor id", func(c *CommandsConfig) { c.SensorID = "" }, "ids"},
		{"no inbox prefix", func(c *CommandsConfig) { c.NATS.InboxPrefix = "" }, "inboxPrefix"},
		{"no API prefix", func(c *CommandsConfig) { c.NATS.JSAPIPrefix = "" }, "jsApiPrefix"},
		{"no handler", func(c *CommandsConfig) { c.Handle = nil }, "handler"},
		{"creds without a JWT", func(c *CommandsConfig) { c.Creds = []byte("not creds") }, "creds"},
		{"creds with a broken JWT", func(c *CommandsConfig) {
			c.Creds = []byte(strings.Replace(string(c.Creds), "eyJ", "eyX", 1))
		}, "creds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := validCommandsConfig(t)
			tc.mutate(&cfg)
			if _, err := NewCommands(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := NewCommands(validCommandsConfig(t)); err != nil {
		t.Fatalf("valid configuration: %v", err)
	}
}

func TestPublishStatusNeedsAConnectionAndAReportableState(t *testing.T) {
	t.Parallel()
	c, err := NewCommands(validCommandsConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PublishStatus(ctx, Status{State: StateOnline, At: testTime}); !errors.Is(err, ErrNotConnected) {
		t.Errorf("before connecting: %v, want ErrNotConnected", err)
	}
	for _, s := range []ReportedState{"", "revoked", "offline", "pending"} {
		if err := c.PublishStatus(ctx, Status{State: s, At: testTime}); err == nil || errors.Is(err, ErrNotConnected) {
			t.Errorf("state %q: %v, want refused before anything is sent", s, err)
		}
	}
	c.Close()
	if err := c.Run(ctx); err == nil {
		t.Error("Run after Close succeeded")
	}
}
