package appenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClosersRunNewestFirstOnce(t *testing.T) {
	var c Closers
	var got []string
	for _, name := range []string{"pool", "connection", "listener"} {
		c.Add(func() { got = append(got, name) })
	}
	c.Close()
	c.Close()
	if want := "listener connection pool"; strings.Join(got, " ") != want {
		t.Fatalf("closed %v, want %s, each once", got, want)
	}
}

// Every server gets its turn within the one timeout; one that does not
// finish is named in a warning and the next still shuts down.
func TestDrain(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var order []string
	stuck := func(ctx context.Context) error { order = append(order, "http"); <-ctx.Done(); return ctx.Err() }
	quick := func(context.Context) error { order = append(order, "grpc"); return nil }
	var deadline time.Time
	last := func(ctx context.Context) error {
		order = append(order, "metrics")
		deadline, _ = ctx.Deadline()
		return nil
	}
	start := time.Now()
	Drain(log, 50*time.Millisecond, Drainer{"http", stuck}, Drainer{"grpc", quick}, Drainer{"metrics http", last})
	if want := "http grpc metrics"; strings.Join(order, " ") != want {
		t.Fatalf("shut down %v, want %s", order, want)
	}
	if deadline.IsZero() || deadline.After(start.Add(time.Second)) {
		t.Errorf("the last server's deadline is %v, want the shared one about 50ms after %v", deadline, start)
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"http shutdown"`) || !strings.Contains(out, "deadline exceeded") {
		t.Errorf("no warning naming the stuck server:\n%s", out)
	}
	if strings.Contains(out, "grpc shutdown") {
		t.Errorf("a warning for a server that finished:\n%s", out)
	}
}

type fakeServer struct{ ran bool }

func (f *fakeServer) Run(context.Context) error { f.ran = true; return nil }

func TestServe(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{}
	build := func(_ context.Context, cfg string, log *slog.Logger) (*fakeServer, error) {
		if cfg != "cfg" || log == nil {
			t.Errorf("build got %q, %v", cfg, log)
		}
		return srv, nil
	}
	if err := Serve(ctx, "cfg", "info", io.Discard, build); err != nil || !srv.ran {
		t.Fatalf("Serve = %v, ran %v; want the built server run", err, srv.ran)
	}
	if err := Serve(ctx, "cfg", "loud", io.Discard, build); err == nil {
		t.Error("an unknown log level was accepted")
	}
	failed := errors.New("no database")
	err := Serve(ctx, "cfg", "info", io.Discard, func(context.Context, string, *slog.Logger) (*fakeServer, error) { return nil, failed })
	if !errors.Is(err, failed) {
		t.Errorf("Serve = %v, want the build error", err)
	}
}

type tailConfig struct {
	ListenAddr string `envconfig:"LISTEN_ADDR" default:":1"`
}

func (c tailConfig) ListenAddress() string { return c.ListenAddr }

// ServiceTail's healthcheck probes the path at LISTEN_ADDR's port and fails
// on a non-2xx answer; version prints name and version.
func TestServiceTail(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "no", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	t.Setenv("LISTEN_ADDR", ":"+srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	var stdout, stderr bytes.Buffer
	if code := ServiceTail[tailConfig](context.Background(), "svc", "healthcheck", "/healthz", &stdout, &stderr); code != 0 {
		t.Errorf("healthcheck of a healthy path = %d (%s), want 0", code, stderr.String())
	}
	if code := ServiceTail[tailConfig](context.Background(), "svc", "healthcheck", "/readyz", &stdout, &stderr); code != 1 {
		t.Errorf("healthcheck of a 503 path = %d, want 1", code)
	}
	if code := ServiceTail[tailConfig](context.Background(), "svc", "version", "/healthz", &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "svc ") {
		t.Errorf("version = %d, %q; want 0 and the name first", code, stdout.String())
	}
}

// RunService runs the dispatched command's runner with the arguments after
// its name and exits with what it returned (0, 1 naming the binary, 2 for a
// usage error); healthcheck and version, which have no runner, are
// ServiceTail's; what Dispatch answers itself runs nothing.
func TestRunService(t *testing.T) {
	var got []string
	commands := map[string]Command{
		"ok":      {Text: "usage: svc ok [args]", Flags: func() *flag.FlagSet { return flag.NewFlagSet("ok", flag.ContinueOnError) }},
		"fails":   {Text: "usage: svc fails"},
		"misused": {Text: "usage: svc misused"},
		"version": {Text: "usage: svc version"},
	}
	runners := map[string]Runner{
		"ok": func(_ context.Context, args []string) error {
			got = append(got, "ok "+strings.Join(args, " "))
			return nil
		},
		"fails":   func(context.Context, []string) error { got = append(got, "fails"); return errors.New("broke") },
		"misused": func(context.Context, []string) error { got = append(got, "misused"); return ErrUsage },
	}
	tests := []struct {
		args    []string
		code    int
		ran     string
		out, er string
	}{
		{[]string{"ok", "a", "b"}, 0, "ok a b", "", ""},
		{[]string{"fails"}, 1, "fails", "", "svc: broke"},
		{[]string{"misused"}, 2, "misused", "", ""},
		{[]string{"version"}, 0, "", "svc ", ""},
		{[]string{"--version"}, 0, "", "svc ", ""},
		{[]string{"bogus"}, 2, "", "", `unknown command "bogus"`},
		{nil, 2, "", "", "USAGE"},
	}
	for _, tc := range tests {
		got = nil
		var stdout, stderr bytes.Buffer
		code := RunService[tailConfig](context.Background(), "svc", "USAGE", "/healthz", commands, runners, tc.args, &stdout, &stderr)
		if code != tc.code || strings.Join(got, ";") != tc.ran {
			t.Errorf("RunService(%q) = %d, ran %q; want %d, ran %q", tc.args, code, got, tc.code, tc.ran)
		}
		if !strings.HasPrefix(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.er) {
			t.Errorf("RunService(%q): stdout %q, stderr %q; want %q first and %q in", tc.args, stdout.String(), stderr.String(), tc.out, tc.er)
		}
	}
}
