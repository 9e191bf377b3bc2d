// Package pgtest gives integration tests a real PostgreSQL. When PG_DSN is
// set it is used as an administrative connection; otherwise the package
// starts a throwaway cluster with the machine's initdb and pg_ctl (Debian's
// postgresql package) for the test binary and removes it afterwards. Every
// call to DSN creates a fresh, empty database, so tests never share state.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/loopback"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/postgres/pgserver"
	"github.com/rxc-project/rxc/migrations"
)

var (
	adminDSN string
	counter  atomic.Int64
	setupMu  sync.Mutex
)

// Main starts PostgreSQL (unless PG_DSN is set), runs the tests and stops it.
// It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	if dsn := os.Getenv("PG_DSN"); dsn != "" {
		adminDSN = dsn
		return m.Run()
	}
	c, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	adminDSN = c.DSN("postgres")
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: stop:", err)
	}
	return code
}

// TB is the part of testing.TB the harnesses use; load drivers outside
// `go test` provide their own.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

var _ TB = testing.TB(nil)

// Pool opens a pool on the database dsn, closed when the test ends.
func Pool(t TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ControlPlanePool is a pool on a new database holding the control plane's
// schema (its migrations applied), closed when the test ends.
func ControlPlanePool(t TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := Pool(t, DSN(t))
	if _, err := migrate.Apply(ctx, pool, "controlplane", migrations.ControlPlane); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// DSN creates a new empty database and returns a DSN for it. The database is
// dropped when the test ends.
func DSN(t TB) string {
	t.Helper()
	if adminDSN == "" {
		t.Fatal("pgtest: call pgtest.Main from TestMain before pgtest.DSN")
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminDSN)
	if err != nil || u.Scheme == "" {
		// Keyword/value DSN: appending dbname overrides an earlier one.
		return adminDSN + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

func admin(ctx context.Context, sql string) error {
	setupMu.Lock()
	defer setupMu.Unlock()
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Cluster is a throwaway PostgreSQL cluster.
type Cluster struct {
	dir   string
	bin   string
	port  int
	runAs string
	opts  Options
}

// Options are what a cluster runs with beyond pgtest's own settings.
type Options struct {
	// Files are written into the cluster's folder under their names before
	// it starts, owned by the server's user with mode 0600 (as a TLS key
	// must be).
	Files map[string][]byte
	// Settings are server settings (-c name=value) after pgtest's own; in
	// a value, "{dir}" stands for the cluster's folder, where Files lie.
	Settings map[string]string
}

// DSN returns a connection string for database db on the cluster.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// SocketDSN returns a connection string for database db over the
// cluster's Unix socket, which pg_hba.conf rules for host connections do
// not cover.
func (c *Cluster) SocketDSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.dir, c.port, db)
}

// Port is the cluster's loopback port.
func (c *Cluster) Port() int { return c.port }

// Start initialises and starts a cluster on a free loopback port.
func Start() (*Cluster, error) { return StartWith(Options{}) }

// StartWith is Start with opts.
func StartWith(opts Options) (*Cluster, error) {
	bin, err := pgserver.Binaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if _, err := user.Lookup("postgres"); err != nil {
			return nil, errors.New("running as root needs a 'postgres' system user for initdb (apt-get install postgresql creates it)")
		}
		c.runAs = "postgres"
	}
	base := os.Getenv("PGTEST_DIR")
	if base == "" {
		base = os.TempDir()
	}
	c.dir, err = os.MkdirTemp(base, "rxc-pgtest-")
	if err != nil {
		return nil, err
	}
	if err := c.prepareDir(); err != nil {
		c.cleanup()
		return nil, err
	}
	if err := c.install(); err != nil {
		c.cleanup()
		return nil, err
	}
	if err := c.run(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("initdb: %w", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		if c.port, err = freePort(); err != nil {
			break
		}
		if err = c.Resume(); err == nil {
			return c, nil
		}
	}
	log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	c.cleanup()
	return nil, fmt.Errorf("pg_ctl start: %w\n%s", err, log)
}

// Own starts a cluster of the test's own, one it may halt and resume
// without touching other tests' databases, stopped when the test ends.
func Own(t TB) *Cluster {
	t.Helper()
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// Stop stops the cluster and removes its files.
func (c *Cluster) Stop() error {
	err := c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "immediate", "-w", "stop")
	c.cleanup()
	return err
}

// Halt stops the cluster (fast shutdown: open sessions are cut) and keeps
// its files, so Resume can start it again: an outage, for fault tests.
func (c *Cluster) Halt() error {
	return c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
}

// Resume starts a halted cluster again on its port.
func (c *Cluster) Resume() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", c.port, c.dir)
	for _, name := range slices.Sorted(maps.Keys(c.opts.Settings)) {
		opts += fmt.Sprintf(" -c %s=%s", name, strings.ReplaceAll(c.opts.Settings[name], "{dir}", c.dir))
	}
	return c.run(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-l", filepath.Join(c.dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start")
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) cleanup() { _ = os.RemoveAll(c.dir) }

// install writes Options.Files into the cluster's folder.
func (c *Cluster) install() error {
	for name, content := range c.opts.Files {
		path := filepath.Join(c.dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return err
		}
		if err := c.chown(path); err != nil {
			return err
		}
	}
	return nil
}

// prepareDir lets the postgres user reach a folder that MkdirTemp made 0700.
func (c *Cluster) prepareDir() error {
	if c.runAs == "" {
		return nil
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return err
	}
	return c.chown(c.dir)
}

// chown gives path to the server's user when it is not this process's.
func (c *Cluster) chown(path string) error {
	if c.runAs == "" {
		return nil
	}
	u, err := user.Lookup(c.runAs)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

func (c *Cluster) run(name string, args ...string) error {
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs, "--", name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func freePort() (int, error) { return loopback.FreePort() }

// Use points DSN at an administrative connection, for programs that start a
// cluster themselves (load drivers) instead of going through Main.
func Use(adminConnString string) { adminDSN = adminConnString }

// PID returns the cluster's postmaster process id (0 when it is not
// running), for load drivers that account the CPU PostgreSQL spends.
func (c *Cluster) PID() int {
	data, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}
