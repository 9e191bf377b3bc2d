package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/openai"
	"github.com/rxc-project/rxc/adapters/openai/openaitest"
	"github.com/rxc-project/rxc/core/analytics"
)

const key = "sk-test-0123456789abcdef"

func client(t *testing.T, base, key string) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{BaseURL: base, APIKey: key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamRelaysDeltas(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, key, "llama3.1:8b", "Hello", ", ", "world.")
	c := client(t, srv.URL, key)
	var got []string
	err := c.Stream(context.Background(), "llama3.1:8b", []analytics.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
		func(s string) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Hello", ", ", "world."}, got); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !reqs[0].Stream || reqs[0].Authorization != "Bearer "+key || len(reqs[0].Messages) != 2 || reqs[0].Messages[1].Content != "hi" {
		t.Errorf("request as received: %+v", reqs)
	}
}

func TestPingAndRefusalsNeverShowTheKey(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, key, "m")
	if err := client(t, srv.URL, key).Ping(context.Background()); err != nil {
		t.Fatalf("ping with the right key: %v", err)
	}
	wrong := "sk-wrong-key-that-must-not-leak"
	err := client(t, srv.URL, wrong).Ping(context.Background())
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusUnauthorized {
		t.Fatalf("ping with a wrong key: %v; want a 401 Error", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error quotes the key: %v", err)
	}
	err = client(t, srv.URL, wrong).Stream(context.Background(), "m", nil, func(string) error { return nil })
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Errorf("stream with a wrong key: %v", err)
	}
}

func TestStreamWithoutDoneFails(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"half\"}}]}\n\n"))
	}))
	t.Cleanup(hs.Close)
	var got string
	err := client(t, hs.URL+"/v1", "").Stream(context.Background(), "m", nil, func(s string) error { got += s; return nil })
	if err == nil || got != "half" {
		t.Fatalf("cut stream: err %v, got %q; want an error after relaying what came", err, got)
	}
}

func TestCancelStopsTheUpstreamCall(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(t, key, "m", "first", "never")
	srv.SetHang(true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- client(t, srv.URL, key).Stream(ctx, "m", nil, func(string) error { cancel(); return nil })
	}()
	select {
	case <-srv.Cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the client go away")
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("stream after cancel: %v; want context.Canceled", err)
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x/v1", "http://user:pw@host/v1", "not a url"} {
		if _, err := openai.New(openai.Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}
