package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rxc-project/rxc/apps/provisioner/app"
	"github.com/rxc-project/rxc/bench/benchenv"
)

// startServe runs `provisioner serve` with env: the binary, or with
// -profile this process's app.Server (so that runtime/pprof sees it). The
// provisioner's log goes to log.
func startServe(ctx context.Context, o options, env []string, log io.Writer) (func(), error) {
	if o.profile == "" {
		serve := exec.Command(o.bin, "serve")
		serve.Env, serve.Stdout, serve.Stderr = env, log, log
		if err := serve.Start(); err != nil {
			return nil, err
		}
		return func() { serve.Process.Signal(os.Interrupt); serve.Wait() }, nil
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	cfg, err := app.LoadServeConfig()
	if err != nil {
		return nil, err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: lvl}))
	sctx, cancel := context.WithCancel(context.Background())
	srv, err := app.NewServer(sctx, cfg, logger)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
		}
	}, nil
}

// startProfile starts a CPU profile and block and mutex profiling for one
// phase; stop writes <phase>-cpu.pprof, <phase>-block.pprof and
// <phase>-mutex.pprof into dir. The block and mutex profiles count from
// the first phase on: compare a later phase with go tool pprof -diff_base.
func startProfile(dir, phase string) (stop func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, phase+"-cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	runtime.SetBlockProfileRate(10_000) // a sample per 10 µs blocked
	runtime.SetMutexProfileFraction(10)
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		for _, p := range []string{"block", "mutex"} {
			out, err := os.Create(filepath.Join(dir, phase+"-"+p+".pprof"))
			if err != nil {
				return err
			}
			if err := pprof.Lookup(p).WriteTo(out, 0); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return fmt.Errorf("%s profile: %w", p, err)
			}
		}
		return nil
	}, nil
}

// serveStatic is the driver started as `-static-server addr=dir`: a bare
// net/http server answering the resolver's paths from the JWT files in dir,
// held in memory, with serve's timeouts and nothing else (no log, no
// metric, no cache, no store): what Go's HTTP server alone costs next to
// nginx on this machine, the ceiling for the provisioner's resolver.
func serveStatic(spec string) error {
	addr, dir, ok := strings.Cut(spec, "=")
	if !ok {
		return fmt.Errorf("-static-server wants addr=dir, not %q", spec)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	jwts := make(map[string][]byte, len(files))
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return err
		}
		jwts[f.Name()] = data
	}
	contentType := []string{"application/jwt"}
	srv := &http.Server{
		Addr: addr, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			data, ok := jwts[strings.TrimPrefix(r.URL.Path, "/jwt/v1/accounts/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header()["Content-Type"] = contentType
			w.Write(data)
		}),
	}
	return srv.ListenAndServe()
}

// startStatic runs this driver's binary as serveStatic on a free port.
func startStatic(dir string) (string, func(), error) {
	port, err := benchenv.FreePort()
	if err != nil {
		return "", nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "-static-server", fmt.Sprintf("127.0.0.1:%d=%s", port, dir))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := waitHTTP(context.Background(), base+"/jwt/v1/accounts/none", 404); err != nil {
		stop()
		return "", nil, err
	}
	return base, stop, nil
}
