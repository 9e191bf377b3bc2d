// Command provisioner-bench measures the provisioner on this machine: the URL
// resolver's throughput and tail latency with 1,000 accounts, side by side
// with nginx serving the same JWTs as static files in the same run, and the
// time to provision 10,000 sensor users with their JetStream consumers. It
// starts its own throwaway PostgreSQL, the provisioner binary, an in-process
// nats-server and nginx, all on loopback, and stops them when done.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/bench/benchenv"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

type options struct {
	bin         string
	accounts    int
	users       int
	tenants     int
	duration    time.Duration
	conns       int
	concurrency int
	out         string
	natsBin     string
	rounds      int
	logLevel    string
	profile     string
	baseline    string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/provisioner", "provisioner binary")
	flag.IntVar(&o.accounts, "accounts", 1000, "tenant accounts to create and resolve")
	flag.IntVar(&o.users, "users", 10000, "sensor users to provision")
	flag.IntVar(&o.tenants, "user-tenants", 10, "tenants the sensor users are spread over")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of each resolver load run")
	flag.IntVar(&o.rounds, "rounds", 3, "alternating resolver rounds (nginx, provisioner); the table gives each side's median")
	flag.IntVar(&o.conns, "conns", 32, "concurrent HTTP connections for the resolver load")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent POST /users requests (and bare consumer creations)")
	flag.StringVar(&o.logLevel, "log-level", "info", "the provisioner's LOG_LEVEL (info, the default in production, writes the access log; it goes to a file)")
	flag.StringVar(&o.baseline, "baseline-bin", "", "a second provisioner binary (an older build) served beside -bin on the same database and nats-server: its resolver takes turns with the other two in every round, and the sensor users are split over both in four turns (baseline, bin, bin, baseline)")
	flag.StringVar(&o.profile, "profile", "", "run serve in this process instead of the binary and write CPU, block and mutex profiles of the resolver load and of POST /users into this directory (the rates measured that way are not the binary's)")
	flag.StringVar(&o.out, "out", "docs/benchmarks-history.md", "append results here (empty: print only)")
	flag.StringVar(&o.natsBin, "nats-server-bin", os.Getenv("RXC_NATS_SERVER_BIN"), "run this nats-server binary for the provisioner instead of the in-process one (default $RXC_NATS_SERVER_BIN)")
	static := flag.String("static-server", "", "(internal) serve the JWT files of dir at addr with a bare net/http server: addr=dir")
	flag.Parse()
	if *static != "" {
		if err := serveStatic(*static); err != nil {
			fmt.Fprintln(os.Stderr, "provisioner-bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner-bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for _, tool := range []string{"wrk", "nginx"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: install Debian's %s package", tool, map[string]string{"wrk": "wrk", "nginx": "nginx-light"}[tool])
		}
	}
	dir, err := os.MkdirTemp("", "rxc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// nginx workers run as an unprivileged user: they must reach the files.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}

	fmt.Println("starting PostgreSQL…")
	pg, err := pgtest.Start()
	if err != nil {
		return err
	}
	defer pg.Stop()
	if err := createDB(ctx, pg.DSN("postgres"), "bench"); err != nil {
		return err
	}

	httpPort, _ := benchenv.FreePort()
	natsPort, _ := benchenv.FreePort()
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	key := make([]byte, 32)
	rand.Read(key)
	secret := base64.RawURLEncoding.EncodeToString(key[:24])
	env := append(os.Environ(),
		"PG_DSN="+pg.DSN("bench"),
		"OPERATOR_SEED_PATH="+filepath.Join(dir, "keys", "operator.nk"),
		"ACCOUNT_SEED_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(key),
		"BACKEND_SHARED_SECRET="+secret,
		"STARTUP_ENSURE_COMMAND_STREAM=true",
		fmt.Sprintf("LISTEN_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", natsPort),
		"LOG_LEVEL="+o.logLevel,
	)
	initCmd := exec.CommandContext(ctx, o.bin, "init-operator", "--resolver-url", base+"/jwt/v1/accounts/", "--nats-config", filepath.Join(dir, "operator.conf"))
	initCmd.Env = env
	if out, err := initCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("init-operator: %v: %s", err, out)
	}
	// The provisioner's log (the access log at info) goes to a file, as it
	// would go to a collector in production, not to this terminal.
	logFile, err := os.Create(filepath.Join(dir, "provisioner.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	stopServe, err := startServe(ctx, o, env, logFile)
	if err != nil {
		return err
	}
	defer stopServe()
	if err := waitHTTP(ctx, base+"/readyz", 503); err != nil { // NATS is not up yet
		return err
	}
	if err := waitHTTP(ctx, base+"/healthz", 204); err != nil {
		return err
	}
	var baseline string // the baseline binary's URL
	if o.baseline != "" {
		port, _ := benchenv.FreePort()
		baseline = fmt.Sprintf("http://127.0.0.1:%d", port)
		blog, err := os.Create(filepath.Join(dir, "baseline.log"))
		if err != nil {
			return err
		}
		defer blog.Close()
		benv := append(slices.Clone(env), fmt.Sprintf("LISTEN_ADDR=127.0.0.1:%d", port), "RESOLVER_SNAPSHOT_PATH="+filepath.Join(dir, "baseline-snapshot.json"))
		stop, err := startServe(ctx, options{bin: o.baseline, logLevel: o.logLevel}, benv, blog)
		if err != nil {
			return err
		}
		defer stop()
		if err := waitHTTP(ctx, baseline+"/healthz", 204); err != nil {
			return err
		}
	}
	natsVersion, stopNATS, err := startNATS(dir, natsPort, o.natsBin)
	if err != nil {
		return err
	}
	defer stopNATS()

	c := &client{base: base, secret: secret, hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	fmt.Printf("creating %d accounts…\n", o.accounts)
	start := time.Now()
	keys, err := c.createAccounts(ctx, o.accounts)
	if err != nil {
		return err
	}
	acctTime := time.Since(start)

	static := filepath.Join(dir, "static")
	if err := writeStatic(ctx, base, static, keys); err != nil {
		return err
	}
	script := filepath.Join(dir, "keys.lua")
	if err := writeLua(script, keys); err != nil {
		return err
	}
	nginxPort, _ := benchenv.FreePort()
	stopNginx, err := startNginx(dir, static, nginxPort)
	if err != nil {
		return err
	}
	defer stopNginx()
	nginxBase := fmt.Sprintf("http://127.0.0.1:%d", nginxPort)

	// Alternate the two targets so drift in the machine's load hits both.
	goBase, stopGo, err := startStatic(filepath.Join(static, "jwt", "v1", "accounts"))
	if err != nil {
		return err
	}
	defer stopGo()
	var nginxRuns, provRuns, baseRuns, goRuns []benchenv.WrkResult
	type target struct {
		name, url string
		into      *[]benchenv.WrkResult
	}
	targets := []target{{"nginx", nginxBase, &nginxRuns}, {"provisioner", base, &provRuns}, {"bare Go net/http", goBase, &goRuns}}
	if baseline != "" {
		targets = append(targets, target{"baseline", baseline, &baseRuns})
	}
	for round := 0; round < o.rounds; round++ {
		for _, t := range targets {
			if _, err := benchenv.Wrk(ctx, t.url, script, 2, o.conns, 2*time.Second); err != nil { // warm-up
				return err
			}
			fmt.Printf("resolver load on %s (round %d, %s)…\n", t.name, round+1, o.duration)
			r, err := benchenv.Wrk(ctx, t.url, script, 2, o.conns, o.duration)
			if err != nil {
				return err
			}
			if r.Errors != "" {
				return fmt.Errorf("%s answered errors under load: %s", t.name, r.Errors)
			}
			*t.into = append(*t.into, r)
		}
	}
	medN, medP := median(nginxRuns), median(provRuns)
	if o.profile != "" {
		fmt.Printf("profiling the resolver (%s)…\n", o.duration)
		stop, err := startProfile(o.profile, "resolver")
		if err != nil {
			return err
		}
		if _, err := benchenv.Wrk(ctx, base, script, 2, o.conns, o.duration); err != nil {
			return err
		}
		if err := stop(); err != nil {
			return err
		}
	}

	fmt.Printf("provisioning %d sensor users with consumers (%d concurrent)…\n", o.users, o.concurrency)
	var stopUsers func() error = func() error { return nil }
	if o.profile != "" {
		if stopUsers, err = startProfile(o.profile, "users"); err != nil {
			return err
		}
	}
	var ures, bures userResult
	allUsers := o.users
	if baseline == "" {
		if ures, err = c.provisionUsers(ctx, 0, o.users, o.tenants, o.concurrency); err != nil {
			return err
		}
	} else {
		// Consumer creation slows as the stream fills: the order
		// baseline, bin, bin, baseline gives both the same share of each.
		bc := *c
		bc.base = baseline
		quarter := o.users / 4
		for i, cl := range []*client{&bc, c, c, &bc} {
			into := &ures
			if cl == &bc {
				into = &bures
			}
			fmt.Printf("  turn %d of 4 (%s): %d users\n", i+1, map[bool]string{true: "baseline", false: "provisioner"}[cl == &bc], quarter)
			r, err := cl.provisionUsers(ctx, i*quarter, quarter, o.tenants, o.concurrency)
			if err != nil {
				return err
			}
			into.add(r)
		}
		o.users = 2 * quarter // each side's count
		ures.finish()
		bures.finish()
	}
	if err := stopUsers(); err != nil {
		return err
	}
	fmt.Printf("bare nats-server: %d durable consumers (%d concurrent)…\n", allUsers, o.concurrency)
	bare, err := bareConsumers(ctx, dir, allUsers, o.concurrency)
	if err != nil {
		return err
	}

	ratio := medP.Requests / medN.Requests
	p99Ratio := float64(medP.P99) / float64(medN.P99)
	userRate, bareRate := float64(o.users)/ures.total.Seconds(), float64(allUsers)/bare.total.Seconds()
	var b strings.Builder
	mode := "the provisioner binary"
	if o.profile != "" {
		mode = "serve in the driver's process, profiled (rates not comparable with the binary's)"
	}
	if baseline != "" {
		mode += fmt.Sprintf(" and a baseline build (%s) beside it on the same database and nats-server, in the same rounds,", filepath.Base(o.baseline))
	}
	fmt.Fprintf(&b, "%s (LOG_LEVEL=%s, its log to a file) against nginx %s serving the same %d JWTs as static files; wrk, 2 threads, %d connections rotating over the %d resolver URLs, %s per run, %d alternating rounds, each side's median round; PostgreSQL %s; nats-server %s for the provisioner (default configuration), %s in-process for the bare consumer run.\n\n",
		mode, o.logLevel, nginxVersion(), o.accounts, o.conns, o.accounts, o.duration, o.rounds, pgVersion(ctx, pg.DSN("bench")), natsVersion, server.VERSION)
	fmt.Fprintf(&b, "| measurement | result | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| resolver GET, provisioner | %s | |\n", rounds(provRuns, medP))
	fmt.Fprintf(&b, "| resolver GET, nginx static | %s | |\n", rounds(nginxRuns, medN))
	medG := median(goRuns)
	fmt.Fprintf(&b, "| resolver GET, bare Go net/http server, the same JWTs from memory (the ceiling for Go) | %s | |\n", rounds(goRuns, medG))
	fmt.Fprintf(&b, "| bare Go / nginx rate (medians); p99 / nginx p99 | %.2f; %.1f× | |\n", medG.Requests/medN.Requests, float64(medG.P99)/float64(medN.P99))
	if baseline != "" {
		medB := median(baseRuns)
		fmt.Fprintf(&b, "| resolver GET, baseline build (same database, same rounds) | %s | |\n", rounds(baseRuns, medB))
		fmt.Fprintf(&b, "| baseline / nginx rate (medians); p99 / nginx p99 | %.2f; %.1f× | |\n", medB.Requests/medN.Requests, float64(medB.P99)/float64(medN.P99))
	}
	fmt.Fprintf(&b, "| provisioner / nginx rate (medians) | %.2f | ≥ 0.90 |\n", ratio)
	fmt.Fprintf(&b, "| provisioner / bare Go net/http rate (medians) | %.2f | |\n", medP.Requests/medG.Requests)
	fmt.Fprintf(&b, "| provisioner p99 / nginx p99 (medians) | %.1f× | ≤ 3× |\n", p99Ratio)
	fmt.Fprintf(&b, "| create %d tenant accounts (POST /accounts, 8 concurrent) | %s (%.0f/s) | |\n", o.accounts, acctTime.Round(time.Millisecond), float64(o.accounts)/acctTime.Seconds())
	fmt.Fprintf(&b, "| provision %d sensor users + consumers (POST /users, %d concurrent; nats-server's default configuration, COMMAND_STREAM_MAX_CONSUMERS default) | %s (%.0f/s), p50 %s, p99 %s; %d failed, %d answered 503 and were retried | 0 failed |\n",
		o.users, o.concurrency, ures.total.Round(time.Millisecond), userRate, ures.p50.Round(10*time.Microsecond), ures.p99.Round(10*time.Microsecond), ures.failed, ures.retried)
	if baseline != "" {
		bRate := float64(o.users) / bures.total.Seconds()
		fmt.Fprintf(&b, "| the same on the baseline build, taking turns (baseline, bin, bin, baseline; %d each) | %s (%.0f/s), p50 %s, p99 %s; %d failed; / bare %.2f | |\n",
			o.users, bures.total.Round(time.Millisecond), bRate, bures.p50.Round(10*time.Microsecond), bures.p99.Round(10*time.Microsecond), bures.failed, bRate/bareRate)
	}
	fmt.Fprintf(&b, "| bare nats-server: %d durable consumers, same settings, same disk (nats.go, %d concurrent) | %s (%.0f/s), p50 %s, p99 %s | the ceiling |\n",
		allUsers, o.concurrency, bare.total.Round(time.Millisecond), bareRate, bare.p50.Round(10*time.Microsecond), bare.p99.Round(10*time.Microsecond))
	fmt.Fprintf(&b, "| POST /users rate / bare consumer creation rate | %.2f | ≥ 0.60 |\n", userRate/bareRate)
	fmt.Println()
	fmt.Print(b.String())
	if o.out != "" {
		if err := benchenv.AppendResults(o.out, "Provisioner", b.String()); err != nil {
			return err
		}
	}
	if ures.failed > 0 {
		return fmt.Errorf("%d of %d sensor users got no consumer", ures.failed, o.users)
	}
	return nil
}

// median returns the round with the median rate (the upper one of an even
// count).
func median(rs []benchenv.WrkResult) benchenv.WrkResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b benchenv.WrkResult) int { return cmp.Compare(a.Requests, b.Requests) })
	return s[len(s)/2]
}

// rounds prints the median round and every round's rate and p99.
func rounds(rs []benchenv.WrkResult, med benchenv.WrkResult) string {
	var each []string
	for _, r := range rs {
		each = append(each, fmt.Sprintf("%.0f/s p99 %s", r.Requests, r.P99))
	}
	return fmt.Sprintf("median %.0f req/s, p50 %s, p99 %s (rounds: %s)", med.Requests, med.P50, med.P99, strings.Join(each, "; "))
}

func createDB(ctx context.Context, dsn, name string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	return err
}

func pgVersion(ctx context.Context, dsn string) string {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "?"
	}
	defer conn.Close(ctx)
	var v string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return strings.Fields(v + " ")[0]
}

func nginxVersion() string {
	out, _ := exec.Command("nginx", "-v").CombinedOutput()
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
}

func waitHTTP(ctx context.Context, url string, want int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %d within 60s", url, want)
}

// startNATS runs the provisioner's nats-server: in-process, or the binary
// bin as a process. It returns the server's version and how to stop it.
func startNATS(dir string, port int, bin string) (string, func(), error) {
	t := &benchenv.T{}
	s := natstest.New(t, natstest.Options{Dir: dir, Name: "provisioner", Port: port, Config: "include \"operator.conf\"\n", Bin: bin, InProcess: bin == ""})
	if err := s.TryStart(); err != nil {
		t.Close()
		return "", nil, err
	}
	v, err := s.Version()
	if err != nil {
		t.Close()
		return "", nil, err
	}
	if s.External() {
		return v + " (external binary)", t.Close, nil
	}
	return v + " (in-process)", t.Close, nil
}

type client struct {
	base, secret string
	hc           *http.Client
}

func (c *client) post(ctx context.Context, path string, body any) (int, []byte, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Backend-Shared-Secret", c.secret)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func (c *client) createAccounts(ctx context.Context, n int) ([]string, error) {
	keys := make([]string, n)
	err := benchenv.Parallel(ctx, n, 8, func(i int) error {
		status, body, err := c.post(ctx, "/accounts", map[string]string{"tenantId": fmt.Sprintf("bench-%04d", i)})
		if err != nil || status >= 300 {
			return fmt.Errorf("POST /accounts: %d %s %v", status, body, err)
		}
		var v struct{ AccountPubKey string }
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		keys[i] = v.AccountPubKey
		return nil
	})
	return keys, err
}

type userResult struct {
	total, p50, p99 time.Duration
	failed, retried int64
	lat             []time.Duration
}

// add sums another turn into r; finish computes the percentiles.
func (r *userResult) add(o userResult) {
	r.total += o.total
	r.failed += o.failed
	r.retried += o.retried
	r.lat = append(r.lat, o.lat...)
}

func (r *userResult) finish() {
	slices.Sort(r.lat)
	r.p50, r.p99 = benchenv.Percentile(r.lat, 50), benchenv.Percentile(r.lat, 99)
}

func (c *client) provisionUsers(ctx context.Context, from, n, tenants, conc int) (userResult, error) {
	lat := make([]time.Duration, n)
	var retried, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	err := benchenv.Parallel(ctx, n, conc, func(i int) error {
		body := map[string]string{"tenantId": fmt.Sprintf("bench-%04d", (from+i)%tenants), "sensorId": fmt.Sprintf("s-%06d", from+i)}
		t0 := time.Now()
		for attempt := 0; ; attempt++ {
			status, out, err := c.post(ctx, "/users", body)
			if err == nil && status == 201 {
				break
			}
			if status == 503 && attempt < 5 {
				retried.Add(1)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			// Counted, not fatal: the run reports how many sensors
			// got no consumer (the 1,001st on nats-server 2.15
			// without a stream limit).
			failed.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("POST /users: %d %s %v", status, out, err))
			break
		}
		lat[i] = time.Since(t0)
		return nil
	})
	total := time.Since(start)
	if err != nil {
		return userResult{}, err
	}
	if r := retried.Load(); r > 0 {
		fmt.Printf("  (%d requests answered 503 and were retried)\n", r)
	}
	if f := failed.Load(); f > 0 {
		fmt.Printf("  %d of %d sensor users failed; first: %v\n", f, n, firstErr.Load())
	}
	slices.Sort(lat)
	return userResult{total: total, p50: benchenv.Percentile(lat, 50), p99: benchenv.Percentile(lat, 99), failed: failed.Load(), retried: retried.Load(), lat: lat}, nil
}

// bareConsumers measures what the provisioner's consumer creation sits on:
// a plain nats-server (JetStream on the same disk, no operator mode, no
// PostgreSQL, no HTTP) creating n durable pull consumers with the settings
// serveradmin uses, on a work-queue stream with an explicit consumer limit.
func bareConsumers(ctx context.Context, dir string, n, conc int) (userResult, error) {
	t := &benchenv.T{}
	defer t.Close()
	ns := natstest.New(t, natstest.Options{Dir: dir, Name: "bare", InProcess: true})
	if err := ns.TryStart(); err != nil {
		return userResult{}, fmt.Errorf("bare nats-server: %w", err)
	}
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		return userResult{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return userResult{}, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BARE", Subjects: []string{"bare.*.*.cmd"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, MaxAge: 168 * time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: n + 10,
	}); err != nil {
		return userResult{}, err
	}
	lat := make([]time.Duration, n)
	var failed atomic.Int64
	start := time.Now()
	err = benchenv.Parallel(ctx, n, conc, func(i int) error {
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := js.CreateOrUpdateConsumer(cctx, "BARE", jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("cmd-t%d-s-%06d", i%10, i), FilterSubject: fmt.Sprintf("bare.t%d.s-%06d.cmd", i%10, i),
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 16,
		})
		if err != nil {
			failed.Add(1)
		}
		lat[i] = time.Since(t0)
		return nil
	})
	total := time.Since(start)
	if err != nil {
		return userResult{}, err
	}
	if f := failed.Load(); f > 0 {
		return userResult{}, fmt.Errorf("bare nats-server refused %d of %d consumers", f, n)
	}
	slices.Sort(lat)
	return userResult{total: total, p50: benchenv.Percentile(lat, 50), p99: benchenv.Percentile(lat, 99)}, nil
}

// writeStatic stores each account's JWT under the same path nginx will serve.
func writeStatic(ctx context.Context, base, root string, keys []string) error {
	dir := filepath.Join(root, "jwt", "v1", "accounts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range keys {
		resp, err := http.Get(base + "/jwt/v1/accounts/" + k)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("fetch %s: %d %v", k, resp.StatusCode, err)
		}
		if err := os.WriteFile(filepath.Join(dir, k), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeLua(path string, keys []string) error {
	var b strings.Builder
	b.WriteString("local keys = {\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "  %q,\n", k)
	}
	b.WriteString("}\nlocal n = 0\nrequest = function()\n  n = n + 1\n  return wrk.format(\"GET\", \"/jwt/v1/accounts/\" .. keys[(n % #keys) + 1])\nend\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func startNginx(dir, root string, port int) (func(), error) {
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(prefix, "logs"), 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`worker_processes auto;
pid %s/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 100000;
  default_type application/jwt;
  server {
    listen 127.0.0.1:%d;
    root %s;
    location / { etag on; }
  }
}
`, prefix, port, root)
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", prefix, "-c", confPath, "-g", "daemon off;")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
	if err := waitHTTP(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/jwt/v1/accounts/", port), 403); err != nil {
		if err2 := waitHTTP(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/jwt/v1/accounts/", port), 404); err2 != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}
