package devstack

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// state is the state folder, locked for one stack at a time.
//
// Layout: secrets.json and operator.txt (0600), pg/ (PostgreSQL, owned by
// the postgres user when run as root), provisioner/operator.nk (the operator
// seed), nats/ (config), jetstream/, ca/, web/, sensors/, logs/.
type state struct {
	dir      string
	lock     *os.File
	secrets  secrets
	password string
}

// secrets are generated on the first start and reused afterwards: without
// them the PostgreSQL data and the account seeds in it are unreadable.
type secrets struct {
	AccountSeedEncryptionKey string `json:"accountSeedEncryptionKey"`
	ProvisionerSharedSecret  string `json:"provisionerSharedSecret"`
	PostgresPassword         string `json:"postgresPassword"`
	// OperatorSecretEncryptionKey seals operators' TOTP secrets; added to
	// a state folder made before it existed at its next start.
	OperatorSecretEncryptionKey string `json:"operatorSecretEncryptionKey"`
}

func openState(dir string) (*state, error) {
	// PostgreSQL's user (and nginx's workers) must traverse the folder; what
	// is secret inside is 0600 or in 0700 folders.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state folder: %w", err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, "rxc-dev.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("state folder %s is in use by another running stack (stop it first)", dir)
	}
	st := &state{dir: dir, lock: lock}
	if err := st.loadSecrets(); err != nil {
		st.close()
		return nil, err
	}
	if err := st.loadPassword(); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

func (st *state) path(elem ...string) string {
	return filepath.Join(append([]string{st.dir}, elem...)...)
}

func (st *state) close() error {
	if st.lock == nil {
		return nil
	}
	err := st.lock.Close()
	st.lock = nil
	return err
}

// readOrCreate reads the private state file p. On the first start (no file
// and no database yet) it calls create instead and says so. A file missing
// while the state folder holds a database is an error: the database was
// made with what the file held.
func (st *state) readOrCreate(p string, create func() error) (data []byte, created bool, err error) {
	data, err = readPrivate(p)
	if errors.Is(err, fs.ErrNotExist) {
		if _, perr := os.Stat(st.path("pg", "data", "PG_VERSION")); perr == nil {
			return nil, false, fmt.Errorf("%s is missing but %s holds a database: restore the file or delete the whole state folder", p, st.path("pg"))
		}
		return nil, true, create()
	}
	return data, false, err
}

func (st *state) loadSecrets() error {
	p := st.path("secrets.json")
	data, created, err := st.readOrCreate(p, func() error {
		st.secrets = secrets{
			AccountSeedEncryptionKey:    randomToken(32),
			ProvisionerSharedSecret:     randomToken(24),
			PostgresPassword:            randomToken(18),
			OperatorSecretEncryptionKey: randomToken(32),
		}
		out, _ := json.MarshalIndent(st.secrets, "", "  ")
		return writePrivate(p, append(out, '\n'))
	})
	if err != nil || created {
		return err
	}
	if err := json.Unmarshal(data, &st.secrets); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if st.secrets.AccountSeedEncryptionKey == "" || st.secrets.ProvisionerSharedSecret == "" || st.secrets.PostgresPassword == "" {
		return fmt.Errorf("%s lacks a value: restore it or delete the whole state folder", p)
	}
	if st.secrets.OperatorSecretEncryptionKey == "" {
		// Nothing was sealed with it yet: a new key loses nothing.
		st.secrets.OperatorSecretEncryptionKey = randomToken(32)
		out, _ := json.MarshalIndent(st.secrets, "", "  ")
		tmp := p + ".new"
		_ = os.Remove(tmp)
		if err := writePrivate(tmp, append(out, '\n')); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	}
	return nil
}

// loadPassword reads the operator's password from operator.txt, creating
// the file with a new password on the first start.
func (st *state) loadPassword() error {
	p := st.path("operator.txt")
	// Missing beside a database, the operator exists with a password only
	// this file knew.
	data, created, err := st.readOrCreate(p, func() error {
		st.password = randomToken(15)
		return writePrivate(p, fmt.Appendf(nil, "email: %s\npassword: %s\n", OperatorEmail, st.password))
	})
	if err != nil || created {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "password: "); ok {
			st.password = strings.TrimSpace(v)
		}
	}
	if st.password == "" {
		return fmt.Errorf("%s has no \"password: \" line", p)
	}
	return nil
}

// readPrivate reads a file that must not be readable by group or others.
func readPrivate(p string) ([]byte, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: it holds secrets and must be 0600", p, info.Mode().Perm())
	}
	return os.ReadFile(p)
}

// writePrivate creates p with mode 0600, never replacing an existing file.
func writePrivate(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// randomToken is n random bytes in URL-safe base64 without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}
