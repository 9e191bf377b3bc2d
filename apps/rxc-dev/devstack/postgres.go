package devstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/postgres/pgserver"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// postgres is the stack's PostgreSQL cluster in STATE/pg, started with the
// machine's pg_ctl (as the postgres user when running as root: PostgreSQL
// refuses to run as root) and kept between runs. It listens on loopback
// and asks for the password stored in secrets.json.
type postgres struct {
	bin      string
	dir      string
	port     int
	password string
	runAs    string
	uid, gid int
}

// preparePostgres initialises the cluster on the first run and stops one a
// killed run left behind, before the stack picks its ports.
func preparePostgres(st *state, say func(string, ...any)) (*postgres, error) {
	bin, err := pgserver.Binaries()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bin: bin, dir: st.path("pg"), password: st.secrets.PostgresPassword}
	if err := pg.placeDir(st, say); err != nil {
		return nil, err
	}
	if strings.ContainsAny(pg.dir, "'\"\\ \n") {
		return nil, fmt.Errorf("PostgreSQL folder %s: its socket folder must not contain quotes, spaces or backslashes (choose another state folder)", pg.dir)
	}
	if err := pg.prepareDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(pg.data(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		say("postgres: initdb %s (first run)", pg.data())
		if err := pg.initdb(); err != nil {
			return nil, err
		}
	}
	// A stack that was killed leaves its postmaster running: this stack holds
	// the state lock, so that server is an orphan and is restarted.
	if pg.ctl("status", "-D", pg.data()) == nil {
		say("postgres: stopping a server left running by an earlier run")
		if err := pg.ctl("stop", "-D", pg.data(), "-m", "fast", "-w", "-t", "30"); err != nil {
			return nil, fmt.Errorf("stop the earlier PostgreSQL: %w", err)
		}
	}
	return pg, nil
}

// start starts the cluster on port; when anyPort, a port taken in the
// meantime is replaced by another free one.
func (pg *postgres) start(ctx context.Context, port int, anyPort bool, say func(string, ...any)) error {
	var err error
	pg.port = port
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if pg.port, err = freePort(); err != nil {
				return err
			}
		}
		opts := fmt.Sprintf("-p %d -k '%s' -c listen_addresses=127.0.0.1 -c max_connections=200", pg.port, pg.dir)
		err = pg.ctl("start", "-D", pg.data(), "-l", filepath.Join(pg.dir, "postgres.log"), "-o", opts, "-w", "-t", "60")
		if err == nil {
			break
		}
		// Another program may have taken the free port in between.
		if !anyPort || attempt == 2 || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(pg.dir, "postgres.log"))
			return fmt.Errorf("pg_ctl start: %w\n%s", err, tail(log, 2000))
		}
	}
	say("postgres: listening on 127.0.0.1:%d (data %s)", pg.port, pg.data())
	return nil
}

func (pg *postgres) data() string { return filepath.Join(pg.dir, "data") }

// dsn is a connection string for database db.
func (pg *postgres) dsn(db string) string {
	u := url.URL{
		Scheme: "postgres", User: url.UserPassword("postgres", pg.password),
		Host: "127.0.0.1:" + strconv.Itoa(pg.port), Path: "/" + db, RawQuery: "sslmode=disable",
	}
	return u.String()
}

func (pg *postgres) stop(context.Context) error {
	// pg_ctl bounds itself with -t; a fast stop rolls back open transactions
	// and checkpoints, so the next start needs no recovery.
	return pg.ctl("stop", "-D", pg.data(), "-m", "fast", "-w", "-t", "20")
}

// pgLocationFile names, inside the state folder, the cluster's folder when
// it lives outside (see placeDir).
const pgLocationFile = "pg-location"

// placeDir chooses the cluster's folder. It is STATE/pg, except when
// running as root with a state folder the postgres user cannot reach (any
// folder under a 0700 home, such as /root): PostgreSQL refuses to run as
// root, so the cluster then lives in a folder of its own under the postgres
// user's home, named after the state folder and recorded in
// STATE/pg-location so that later runs and -clean find it.
func (pg *postgres) placeDir(st *state, say func(string, ...any)) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return errors.New("running as root needs a 'postgres' system user to run PostgreSQL (apt-get install postgresql creates it)")
	}
	pg.runAs = u.Username
	pg.uid, _ = strconv.Atoi(u.Uid)
	pg.gid, _ = strconv.Atoi(u.Gid)
	if data, err := os.ReadFile(st.path(pgLocationFile)); err == nil {
		pg.dir = strings.TrimSpace(string(data))
		say("postgres: cluster in %s (the postgres user cannot reach %s)", pg.dir, st.dir)
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if _, err := os.Stat(filepath.Join(pg.dir, "data", "PG_VERSION")); err == nil || pg.canReach(st.dir) {
		return nil
	}
	home := u.HomeDir
	if home == "" || home == "/" || !filepath.IsAbs(home) {
		home = "/var/lib/postgresql"
	}
	parent := filepath.Join(home, "rxc-dev")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	if err := os.Chown(parent, pg.uid, pg.gid); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	pg.dir = externalPGDir(parent, st.dir)
	if !pg.canReach(parent) {
		return fmt.Errorf("the postgres user cannot reach %s nor %s: choose a state folder every user can traverse (-state)", st.dir, parent)
	}
	if err := atomicfile.Write(st.path(pgLocationFile), []byte(pg.dir+"\n"), 0o644); err != nil {
		return err
	}
	say("postgres: the postgres user cannot reach %s, so the cluster lives in %s (make demo-clean removes it)", st.dir, pg.dir)
	return nil
}

// externalPGDir is the cluster folder under parent for the state folder
// stateDir: its base name for people, a hash of its path for uniqueness.
func externalPGDir(parent, stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, strings.TrimPrefix(filepath.Base(stateDir), "."))
	if len(name) > 32 {
		name = name[:32]
	}
	return filepath.Join(parent, name+"-"+hex.EncodeToString(sum[:6]))
}

// canReach tells whether the postgres user can traverse dir.
func (pg *postgres) canReach(dir string) bool {
	return exec.Command("runuser", "-u", pg.runAs, "--", "test", "-x", dir).Run() == nil
}

// removeCluster deletes a cluster folder kept outside the state folder
// (placeDir), refusing anything but such a folder.
func removeCluster(stateDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, pgLocationFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(data))
	if !filepath.IsAbs(dir) || filepath.Base(filepath.Dir(dir)) != "rxc-dev" || dir != externalPGDir(filepath.Dir(dir), stateDir) {
		return "", fmt.Errorf("%s names %q, which is not this state folder's cluster: remove it by hand", pgLocationFile, dir)
	}
	return dir, os.RemoveAll(dir)
}

// prepareDir makes the cluster folder (0700), owned by the postgres user
// when root.
func (pg *postgres) prepareDir() error {
	if err := os.MkdirAll(pg.dir, 0o700); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	if pg.runAs == "" {
		return os.Chmod(pg.dir, 0o700)
	}
	if err := os.Chown(pg.dir, pg.uid, pg.gid); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	if err := os.Chmod(pg.dir, 0o700); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	if err := exec.Command("runuser", "-u", pg.runAs, "--", "test", "-w", pg.dir).Run(); err != nil {
		return fmt.Errorf("the postgres user cannot reach %s: every folder above it must be searchable by others (chmod o+x), or choose a state folder elsewhere", pg.dir)
	}
	return nil
}

func (pg *postgres) initdb() error {
	pwfile := filepath.Join(pg.dir, ".pwfile")
	if err := os.WriteFile(pwfile, []byte(pg.password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if pg.runAs != "" {
		if err := os.Chown(pwfile, pg.uid, pg.gid); err != nil {
			return err
		}
	}
	err := pg.run(filepath.Join(pg.bin, "initdb"), "-D", pg.data(), "-U", "postgres", "--pwfile", pwfile,
		"-A", "scram-sha-256", "-E", "UTF8", "--no-instructions")
	if err != nil {
		// A half-made data folder would look initialised to the next run.
		_ = os.RemoveAll(pg.data())
		return fmt.Errorf("initdb: %w", err)
	}
	return nil
}

func (pg *postgres) ctl(args ...string) error {
	return pg.run(filepath.Join(pg.bin, "pg_ctl"), args...)
}

func (pg *postgres) run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if pg.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", pg.runAs, "--", name}, args...)...)
	}
	cmd.Dir = pg.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(name), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensureDatabases creates the named databases when missing.
func (pg *postgres) ensureDatabases(ctx context.Context, names ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.dsn("postgres"))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	for _, name := range names {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if exists {
			continue
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return fmt.Errorf("postgres: create database %s: %w", name, err)
		}
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// Clean deletes a stack's state folder and its PostgreSQL cluster (also
// one kept outside the folder), stopping a server a killed run left
// running. It refuses a folder a running stack holds. It returns what it
// removed.
func Clean(stateDir string) ([]string, error) {
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "rxc-dev.lock")); err != nil {
		return nil, fmt.Errorf("%s is not a state folder of rxc-dev (no rxc-dev.lock): not removed", dir)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "rxc-dev.lock"), os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("state folder %s is in use by a running stack (stop it first)", dir)
	}
	clusterDir := filepath.Join(dir, "pg")
	if data, err := os.ReadFile(filepath.Join(dir, pgLocationFile)); err == nil {
		clusterDir = strings.TrimSpace(string(data))
	}
	if _, err := os.Stat(filepath.Join(clusterDir, "data", "PG_VERSION")); err == nil {
		if bin, err := pgserver.Binaries(); err == nil {
			pg := &postgres{bin: bin, dir: clusterDir}
			if os.Geteuid() == 0 {
				pg.runAs = "postgres"
			}
			if pg.ctl("status", "-D", pg.data()) == nil {
				if err := pg.ctl("stop", "-D", pg.data(), "-m", "fast", "-w", "-t", "30"); err != nil {
					return nil, fmt.Errorf("stop the PostgreSQL left running: %w", err)
				}
			}
		}
	}
	var removed []string
	ext, err := removeCluster(dir)
	if err != nil {
		return nil, err
	}
	if ext != "" {
		removed = append(removed, ext)
	}
	if err := os.RemoveAll(dir); err != nil {
		return removed, err
	}
	return append(removed, dir), nil
}
