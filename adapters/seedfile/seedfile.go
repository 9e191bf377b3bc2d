// Package seedfile keeps the operator's seed files on disk: read only when
// no one but the owner can read them, written to a private temporary file
// first and linked into place, so a seed file is never replaced or left
// half written. Files is the provisioning.SeedFiles init-operator uses.
package seedfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// Read reads the operator seed file, refusing one that others can read.
func Read(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("operator seed file %s does not exist: run provisioner init-operator first", path)
	}
	if err != nil {
		return nil, fmt.Errorf("operator seed file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("operator seed file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("operator seed file %s has mode %04o: it must not be accessible to group or others (chmod 600)", path, perm)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operator seed file: %w", err)
	}
	return []byte(strings.TrimSpace(string(seed))), nil
}

// Stage writes seed to a new 0600 file beside path, creating the parent
// folder 0700 if needed, and returns its name. os.Link then puts it in
// place without ever replacing a file.
func Stage(path string, seed []byte) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("operator seed folder: %w", err)
	}
	f, err := os.CreateTemp(dir, ".operator-seed-*")
	if err != nil {
		return "", fmt.Errorf("operator seed file: %w", err)
	}
	name := f.Name()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if _, err := f.Write(append(seed, '\n')); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	return name, f.Close()
}

// Files is the provisioning.SeedFiles of the local file system.
type Files struct{}

// Exists implements provisioning.SeedFiles; a symbolic link counts, even a
// dangling one.
func (Files) Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, err
}

// ReadSeed implements provisioning.SeedFiles with Read.
func (Files) ReadSeed(path string) ([]byte, error) { return Read(path) }

// StageSeed implements provisioning.SeedFiles with Stage.
func (Files) StageSeed(path string, seed []byte) (string, error) { return Stage(path, seed) }

// PlaceSeed implements provisioning.SeedFiles: os.Link fails if path
// exists, so a seed file is never overwritten.
func (Files) PlaceSeed(staged, path string) error { return os.Link(staged, path) }

// Discard implements provisioning.SeedFiles.
func (Files) Discard(staged string) { os.Remove(staged) }

// WriteConfig implements provisioning.SeedFiles: the fragment is not
// secret (mode 0644) and is replaced atomically.
func (Files) WriteConfig(path string, data []byte) error { return atomicfile.Write(path, data, 0o644) }
