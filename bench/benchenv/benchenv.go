// Package benchenv holds what RXC's load drivers share: a description of the
// machine a result was measured on, a wrk runner that reports throughput and
// tail latency, child-process management, a bounded worker pool, and
// appending results to docs/benchmarks-history.md. Drivers only ever target loopback addresses.
package benchenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/adapters/loopback"
)

// Machine describes where a benchmark ran.
func Machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				kb, _ := strconv.Atoi(strings.Fields(l)[1])
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/1024/1024)
			}
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s %s/%s", runtime.NumCPU(), cpu, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) { return loopback.FreePort() }

// WrkResult is one wrk run.
type WrkResult struct {
	Requests  float64 // requests per second
	P50, P99  time.Duration
	Errors    string // non-2xx or socket errors as wrk printed them, if any
	TotalReqs int
}

var (
	reqsRe   = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	totalRe  = regexp.MustCompile(`(\d+) requests in`)
	pctRe    = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([0-9.]+)(us|ms|s)\s*$`)
	errorsRe = regexp.MustCompile(`(?m)^\s+(Non-2xx or 3xx responses:.*|Socket errors:.*)$`)
)

// Wrk runs wrk against baseURL for d with conns connections and threads
// threads; script is a Lua file that picks request paths.
func Wrk(ctx context.Context, baseURL, script string, threads, conns int, d time.Duration) (WrkResult, error) {
	args := []string{"-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency"}
	if script != "" {
		args = append(args, "-s", script)
	}
	args = append(args, baseURL)
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return WrkResult{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	var r WrkResult
	if m := reqsRe.FindSubmatch(out); m != nil {
		r.Requests, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := totalRe.FindSubmatch(out); m != nil {
		r.TotalReqs, _ = strconv.Atoi(string(m[1]))
	}
	for _, m := range pctRe.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(m[3])]
		dur := time.Duration(v * float64(unit))
		if string(m[1]) == "50" {
			r.P50 = dur
		} else {
			r.P99 = dur
		}
	}
	for _, m := range errorsRe.FindAllSubmatch(out, -1) {
		r.Errors += strings.TrimSpace(string(m[1])) + " "
	}
	if r.Requests == 0 {
		return r, fmt.Errorf("wrk printed no rate:\n%s", out)
	}
	return r, nil
}

// Percentile returns the p-th percentile (0–100) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// AppendResults appends a markdown section to path, creating it with a title.
func AppendResults(path, title, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Size() == 0 {
		fmt.Fprintln(f, "# Benchmarks\n\nResults appended by `make bench`, newest last. Each section names the machine it ran on.")
	}
	_, err = fmt.Fprintf(f, "\n## %s — %s\n\nMachine: %s\n\n%s\n", title, time.Now().UTC().Format("2006-01-02 15:04 MST"), Machine(), body)
	return err
}

// Parallel calls fn(0) … fn(n-1) from at most conc goroutines and returns
// the first error; after an error, or once ctx ends, no further calls start.
func Parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(conc, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err; next.Store(int64(n)) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
