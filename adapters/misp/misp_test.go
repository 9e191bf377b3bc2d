package misp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/misp"
	"github.com/rxc-project/rxc/adapters/misp/misptest"
	"github.com/rxc-project/rxc/core/analytics"
)

const key = "misp-key-0123456789"

var scanner = misptest.Attribute{Value: "198.51.100.7", Type: "ip-src", Category: "Network activity", EventInfo: "Mass scanning campaign"}

// newClient is misp.New of cfg, which must succeed.
func newClient(t *testing.T, cfg misp.Config) *misp.Client {
	t.Helper()
	c, err := misp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLookupHitAndMiss(t *testing.T) {
	t.Parallel()
	srv := misptest.New(t, key, scanner)
	c := newClient(t, misp.Config{URL: srv.URL, Key: key})
	got, err := c.Lookup(context.Background(), "198.51.100.7")
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.IntelHit{{Value: "198.51.100.7", Type: "ip-src", Category: "Network activity", Event: "Mass scanning campaign"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hit (-want +got):\n%s", diff)
	}
	if got, err := c.Lookup(context.Background(), "198.51.100.8"); err != nil || len(got) != 0 {
		t.Errorf("miss: %v, %v; want no hit and no error", got, err)
	}
	if srv.Refused() != 0 {
		t.Errorf("the fake refused %d requests: wrong wire format", srv.Refused())
	}
}

func TestWrongKeyIsAnErrorWithoutTheKey(t *testing.T) {
	t.Parallel()
	srv := misptest.New(t, key, scanner)
	wrong := "misp-wrong-key-must-not-leak"
	c := newClient(t, misp.Config{URL: srv.URL, Key: wrong})
	_, err := c.Lookup(context.Background(), "198.51.100.7")
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestLookupTimesOut(t *testing.T) {
	t.Parallel()
	srv := misptest.New(t, key, scanner)
	srv.SetHang(true)
	c := newClient(t, misp.Config{URL: srv.URL, Key: key, Timeout: 50 * time.Millisecond})
	_, err := c.Lookup(context.Background(), "198.51.100.7")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging MISP: %v; want a deadline error", err)
	}
}

func TestTLSVerification(t *testing.T) {
	t.Parallel()
	srv := misptest.NewTLS(t, key, scanner)
	strict := newClient(t, misp.Config{URL: srv.URL, Key: key})
	if _, err := strict.Lookup(context.Background(), "198.51.100.7"); err == nil {
		t.Fatal("a self-signed certificate was accepted without INSECURE_SKIP_VERIFY")
	}
	if len(srv.Searched()) != 0 {
		t.Fatal("the key reached a server whose certificate failed verification")
	}
	lax := newClient(t, misp.Config{URL: srv.URL, Key: key, InsecureSkipVerify: true})
	if got, err := lax.Lookup(context.Background(), "198.51.100.7"); err != nil || len(got) != 1 {
		t.Fatalf("with InsecureSkipVerify: %v, %v", got, err)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []misp.Config{{URL: "", Key: key}, {URL: "https://misp.example"}, {URL: "file:///etc/passwd", Key: key}} {
		if _, err := misp.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
