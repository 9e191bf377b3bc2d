package sensorwire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// These tests use only the standard library, as the package does.

const status = `{"state":"running","commandId":"c1","at":"2026-03-01T12:00:00Z","detail":"ok","agentVersion":"1.2.3",` +
	`"results":[{"commandId":"c0","outcome":"refused","reason":"expired","at":"2026-03-01T12:00:00Z"}]}`

func TestDecodeStatus(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	got, err := sensorwire.DecodeStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sensorwire.StateRunning || got.CommandID != "c1" || !got.At.Equal(at) || got.Detail != "ok" || got.AgentVersion != "1.2.3" ||
		len(got.Results) != 1 || got.Results[0] != (sensorwire.CommandResult{CommandID: "c0", Outcome: sensorwire.OutcomeRefused, Reason: sensorwire.ReasonExpired, At: got.Results[0].At}) ||
		!got.Results[0].At.Equal(at) {
		t.Errorf("DecodeStatus = %+v", got)
	}
	for name, payload := range map[string]string{
		"unknown field":        `{"state":"online","at":"2026-03-01T12:00:00Z","sensorId":"x"}`,
		"unknown result field": `{"state":"online","results":[{"commandId":"c0","extra":1}]}`,
		"trailing object":      `{"state":"online","at":"2026-03-01T12:00:00Z"}{}`,
		"trailing garbage":     `{"state":"online","at":"2026-03-01T12:00:00Z"} x`,
		"not an object":        `["online"]`,
		"bad time":             `{"state":"online","at":"yesterday"}`,
		"too big":              `{"state":"online","detail":"` + strings.Repeat("d", sensorwire.MaxStatusBytes) + `"}`,
		"empty":                ``,
		"cut short":            `{"state":`,
	} {
		if s, err := sensorwire.DecodeStatus([]byte(payload)); !errors.Is(err, sensorwire.ErrMalformed) || s.State != "" {
			t.Errorf("%s: DecodeStatus = %+v, %v; want nothing and ErrMalformed", name, s, err)
		}
	}
	// Exactly at the bound is accepted: the limit is not off by one.
	pad := `{"state":"online","detail":"`
	exact := pad + strings.Repeat("d", sensorwire.MaxStatusBytes-len(pad)-2) + `"}`
	if _, err := sensorwire.DecodeStatus([]byte(exact)); err != nil {
		t.Errorf("status of exactly MaxStatusBytes: %v", err)
	}
}

func TestDecodeCommand(t *testing.T) {
	t.Parallel()
	c := sensorwire.Command{
		CommandID: "c1", TenantID: "acme", SensorID: "s1", Action: sensorwire.ActionStop,
		IssuedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), IssuedBy: "ops", ExpiresAt: time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC),
	}
	data, err := sensorwire.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sensorwire.DecodeCommand(data); err != nil || got != c {
		t.Errorf("round trip = %+v, %v; want %+v", got, err, c)
	}
	// A newer control plane may add fields: the sensor ignores them.
	newer := strings.Replace(string(data), "{", `{"priority":"high",`, 1)
	if got, err := sensorwire.DecodeCommand([]byte(newer)); err != nil || got != c {
		t.Errorf("with an unknown field = %+v, %v; want %+v", got, err, c)
	}
	for name, payload := range map[string]string{
		"trailing data": string(data) + `{}`,
		"not an object": `[]`,
		"oversized":     `{"pad":"` + strings.Repeat("x", sensorwire.MaxCommandBytes) + `"}`,
		"bad time":      `{"commandId":"c1","issuedAt":"yesterday"}`,
	} {
		if got, err := sensorwire.DecodeCommand([]byte(payload)); !errors.Is(err, sensorwire.ErrMalformed) || got != (sensorwire.Command{}) {
			t.Errorf("%s: DecodeCommand = %+v, %v; want nothing and ErrMalformed", name, got, err)
		}
	}
}

// A confirmation round-trips with the field names the agents read; the
// decoder is bounded and takes one object only.
func TestConfirmation(t *testing.T) {
	t.Parallel()
	c := sensorwire.Confirmation{TenantID: "acme", SensorID: "s1", Recorded: []string{"c1", "c2"}}
	data, err := sensorwire.EncodeConfirmation(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tenantId":"acme","sensorId":"s1","recorded":["c1","c2"]}`; string(data) != want {
		t.Errorf("EncodeConfirmation = %s, want %s", data, want)
	}
	got, err := sensorwire.DecodeConfirmation(data)
	if err != nil || got.TenantID != "acme" || got.SensorID != "s1" || strings.Join(got.Recorded, ",") != "c1,c2" {
		t.Errorf("DecodeConfirmation = %+v, %v", got, err)
	}
	if _, err := sensorwire.DecodeConfirmation([]byte(`{"tenantId":"acme","sensorId":"s1","recorded":[],"newer":1}`)); err != nil {
		t.Errorf("unknown field refused: %v", err)
	}
	for name, payload := range map[string]string{
		"not json":      `not json`,
		"trailing data": `{"tenantId":"acme","sensorId":"s1","recorded":["c1"]} x`,
		"not an object": `["c1"]`,
		"too big":       `{"tenantId":"acme","sensorId":"s1","recorded":["` + strings.Repeat("x", sensorwire.MaxConfirmationBytes) + `"]}`,
	} {
		if c, err := sensorwire.DecodeConfirmation([]byte(payload)); !errors.Is(err, sensorwire.ErrMalformed) || c.SensorID != "" {
			t.Errorf("%s: DecodeConfirmation = %+v, %v; want nothing and ErrMalformed", name, c, err)
		}
	}
}

func TestCommandExpired(t *testing.T) {
	t.Parallel()
	exp := time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC)
	c := sensorwire.Command{ExpiresAt: exp}
	if c.Expired(exp.Add(-time.Nanosecond)) || !c.Expired(exp) {
		t.Error("a command expires at its expiresAt, not before")
	}
	if !sensorwire.ActionStart.Valid() || !sensorwire.ActionStop.Valid() || sensorwire.Action("reboot").Valid() {
		t.Error("Valid: start and stop only")
	}
}

func FuzzDecodeStatus(f *testing.F) {
	f.Add([]byte(status))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := sensorwire.DecodeStatus(data)
		if err != nil {
			if !errors.Is(err, sensorwire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(data) > sensorwire.MaxStatusBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		again, err := sensorwire.EncodeStatus(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sensorwire.DecodeStatus(again); err != nil && len(again) <= sensorwire.MaxStatusBytes {
			t.Fatalf("re-encoded %q is refused: %v", again, err)
		}
	})
}
