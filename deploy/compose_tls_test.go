package deploy

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/internal/natstest"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// natsTLSDir is where compose mounts the certificates into nats-server.
const natsTLSDir = "/etc/nats/tls/"

var (
	certsOnce sync.Once
	certsDir  string
	certsErr  error
)

// composeCerts runs tls/make-certs.sh once for the package's tests, into a
// folder of its own, and returns that folder.
func composeCerts(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed; tls/make-certs.sh needs it")
	}
	certsOnce.Do(func() {
		certsDir, certsErr = os.MkdirTemp("", "rxc-compose-tls-")
		if certsErr != nil {
			return
		}
		out, err := exec.Command("sh", "tls/make-certs.sh", certsDir).CombinedOutput()
		if err != nil {
			certsErr = fmt.Errorf("tls/make-certs.sh: %v: %s", err, out)
		}
	})
	if certsErr != nil {
		t.Fatal(certsErr)
	}
	return certsDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if certsDir != "" {
		os.RemoveAll(certsDir)
	}
	os.Exit(code)
}

// make-certs keeps what exists: a second run changes no file, so clients
// keep trusting the CA; keys are 0600.
func TestMakeCertsKeepsItsCA(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	dir := t.TempDir()
	run := func() {
		if out, err := exec.Command("sh", "tls/make-certs.sh", dir).CombinedOutput(); err != nil {
			t.Fatalf("make-certs.sh: %v: %s", err, out)
		}
	}
	run()
	before := map[string]string{}
	for _, f := range []string{"ca.crt", "ca.key", "nats.crt", "nats.key", "postgres.crt", "postgres.key"} {
		before[f] = readFile(t, filepath.Join(dir, f))
		st, _ := os.Stat(filepath.Join(dir, f))
		if strings.HasSuffix(f, ".key") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", f, st.Mode().Perm())
		}
	}
	run()
	for f, b := range before {
		if readFile(t, filepath.Join(dir, f)) != b {
			t.Errorf("a second run changed %s", f)
		}
	}
}

var listenLine = regexp.MustCompile(`(?m)^(\s*)listen:\s*\S+$`)

// The three compose nodes run with their configs (TLS blocks as written,
// certificates of tls/make-certs.sh, ports and routes moved to loopback):
// they form the cluster over verified TLS routes, carry messages between
// nodes, and accept only TLS clients that trust tls/ca.crt.
func TestComposeNATSClusterRunsWithTLS(t *testing.T) {
	c := loadCompose(t)
	nodes := composeNodes(t, c)
	certs := composeCerts(t)
	names := sortedKeys(nodes)
	client, route := map[string]int{}, map[string]int{}
	for _, n := range names {
		var err error
		if client[n], err = loopback.FreePort(); err != nil {
			t.Fatal(err)
		}
		if route[n], err = loopback.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	// natstest writes the client listen, monitoring port, server name and
	// JetStream store; the node's own settings follow as it wrote them,
	// its store moved to natstest's and its routes to loopback.
	servers := map[string]*natstest.Server{}
	for _, n := range names {
		dir := t.TempDir()
		conf := nodes[n]
		conf = includeLine.ReplaceAllString(conf, "") // no operator: TLS is what runs here
		conf = strings.Replace(conf, "http_port: 8222", "", 1)
		conf = strings.Replace(conf, "/data/jetstream", filepath.Join(dir, "jetstream-"+n), 1)
		first := true
		conf = listenLine.ReplaceAllStringFunc(conf, func(l string) string {
			if first { // the client listen: natstest's
				first = false
				return ""
			}
			indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
			return fmt.Sprintf("%slisten: 127.0.0.1:%d", indent, route[n])
		})
		for _, other := range names {
			conf = strings.ReplaceAll(conf, fmt.Sprintf("nats-route://%s:%d", other, natsRoutePort), fmt.Sprintf("nats-route://127.0.0.1:%d", route[other]))
		}
		servers[n] = natstest.New(t, natstest.Options{Dir: dir, Name: n, Port: client[n], Config: conf, ReadyTimeout: 60 * time.Second})
	}
	// A node is healthy once the cluster has a JetStream meta leader:
	// start all of them before waiting on any.
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			if err := servers[n].TryStart(); err != nil {
				t.Errorf("%s did not start: %v", n, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range names {
		var routez struct {
			NumRoutes int `json:"num_routes"`
		}
		for servers[n].Monitor("/routez", &routez) != nil || routez.NumRoutes < len(names)-1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s has %d routes, want %d: the TLS routes do not form", n, routez.NumRoutes, len(names)-1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	ca := nats.RootCAs(filepath.Join(certs, "ca.crt"))
	sub, err := nats.Connect(fmt.Sprintf("tls://localhost:%d", client[names[0]]), ca)
	if err != nil {
		t.Fatalf("TLS client trusting tls/ca.crt: %v", err)
	}
	defer sub.Close()
	if !sub.TLSRequired() {
		t.Error("the server does not require TLS")
	}
	msgs, err := sub.SubscribeSync("rxc.tls.check")
	if err != nil {
		t.Fatal(err)
	}
	sub.Flush()
	pub, err := nats.Connect(fmt.Sprintf("tls://localhost:%d", client[names[len(names)-1]]), ca)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// Interest crosses the routes asynchronously: publish until it arrives.
	var got *nats.Msg
	for end := time.Now().Add(30 * time.Second); got == nil && time.Now().Before(end); {
		pub.Publish("rxc.tls.check", []byte("over TLS routes"))
		pub.Flush()
		got, _ = msgs.NextMsg(200 * time.Millisecond)
	}
	if got == nil {
		t.Fatal("a message published on one node never reached a subscriber on another")
	}

	if nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", client[names[1]]), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client without TLS connected")
	}
	if nc, err := nats.Connect(fmt.Sprintf("tls://localhost:%d", client[names[1]]), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("a client that does not trust tls/ca.crt connected")
	}
}

var settingArg = regexp.MustCompile(`-c\s+([a-z_]+)=(\S+)`)

// PostgreSQL runs with the settings of compose's postgres entrypoint and
// its pg_hba.conf, with the key installed as the entrypoint installs it:
// a client with the services' DSN (verify-full against tls/ca.crt)
// connects over TLS 1.3 with its password; one without TLS is refused, and
// so is one that trusts another CA.
func TestComposePostgresRunsWithTLS(t *testing.T) {
	c := loadCompose(t)
	certs := composeCerts(t)
	pg := c.Services["postgres"]
	if pg == nil {
		t.Fatal("no postgres service")
	}
	// What the entrypoint installs and mounts, in the cluster's folder.
	files := map[string]string{
		"/var/lib/postgresql/server.key": filepath.Join(certs, "postgres.key"),
		"/var/lib/postgresql/server.crt": filepath.Join(certs, "postgres.crt"),
		"/etc/rxc/pg_hba.conf":           "postgres/pg_hba.conf",
	}
	opts := pgtest.Options{Files: map[string][]byte{}, Settings: map[string]string{}}
	for target, src := range files {
		opts.Files[filepath.Base(target)] = []byte(readFile(t, src))
	}
	settings := settingArg.FindAllStringSubmatch(strings.Join(pg.Entrypoint, " "), -1)
	if len(settings) == 0 {
		t.Fatal("compose's postgres entrypoint passes no -c settings")
	}
	for _, m := range settings {
		v := m[2]
		if _, ok := files[v]; ok {
			v = "{dir}/" + filepath.Base(v)
		}
		opts.Settings[m[1]] = v
	}
	cluster, err := pgtest.StartWith(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The image creates the role and databases over the socket.
	admin, err := pgx.Connect(ctx, cluster.SocketDSN("postgres"))
	if err != nil {
		t.Fatalf("socket connection for setup: %v", err)
	}
	for _, q := range []string{`CREATE ROLE rxc LOGIN PASSWORD 'compose-test-password'`, `CREATE DATABASE provisioner OWNER rxc`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close(ctx)

	// The provisioner's DSN, pointed at this server.
	dsn, _ := interpolate(c.Services["provisioner"].Environment["PG_DSN"], map[string]string{"POSTGRES_PASSWORD": "compose-test-password"})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = fmt.Sprintf("localhost:%d", cluster.Port())
	q := u.Query()
	q.Set("sslrootcert", filepath.Join(certs, "ca.crt"))
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("the services' DSN: %v", err)
	}
	var ssl bool
	var version string
	if err := conn.QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if !ssl || version != "TLSv1.3" {
		t.Fatalf("connection ssl %v version %q, want TLS 1.3", ssl, version)
	}

	for name, mutate := range map[string]func(url.Values){
		"without TLS":    func(q url.Values) { q.Set("sslmode", "disable"); q.Del("sslrootcert") },
		"trusting no CA": func(q url.Values) { q.Del("sslrootcert") },
	} {
		v := *u
		q := v.Query()
		mutate(q)
		v.RawQuery = q.Encode()
		if conn, err := pgx.Connect(ctx, v.String()); err == nil {
			conn.Close(ctx)
			t.Errorf("a client %s connected", name)
		}
	}
}
