package x509ca

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Errors of a CA rotation.
var (
	// ErrRotationInProgress is Rotate finding a previous CA: the running
	// rotation must be finished first.
	ErrRotationInProgress = errors.New("a CA rotation is in progress")
	// ErrNoRotation is FinishRotation finding no previous CA.
	ErrNoRotation = errors.New("no CA rotation is in progress")
)

// RotateOptions describe the new CA of Rotate.
type RotateOptions struct {
	// Organization defaults to the current CA's.
	Organization string
	// CAValidity defaults to DefaultCAValidity.
	CAValidity time.Duration
}

// RotateResult reports a rotation's step.
type RotateResult struct {
	CANotAfter         time.Time
	PreviousCANotAfter time.Time
	// ServerReissued is FinishRotation having issued the server
	// certificate from the new CA (for the same names).
	ServerReissued bool
	ServerNotAfter time.Time
}

// Rotate starts a CA rotation in dir: the current CA becomes the previous
// one (previous-ca.crt, previous-ca.key) and a new CA key and certificate
// take its place. During the overlap the control plane issues sensor
// certificates from the new CA, trusts client certificates of both, sends
// sensors both CA certificates, and keeps the server certificate the
// previous CA signed (sensors that have not renewed yet trust only that
// one). FinishRotation ends it.
func Rotate(dir string, opts RotateOptions) (RotateResult, error) {
	if err := ensurePrivateDir(dir); err != nil {
		return RotateResult{}, err
	}
	paths := Config{Dir: dir}.withDefaults()
	for _, p := range []string{paths.PreviousCACertPath, filepath.Join(dir, PreviousCAKeyFile)} {
		if _, err := os.Lstat(p); err == nil {
			return RotateResult{}, fmt.Errorf("x509ca: %w (%s exists): finish it first", ErrRotationInProgress, p)
		}
	}
	old, oldPEM, oldKey, err := loadCA(paths)
	if err != nil {
		return RotateResult{}, fmt.Errorf("x509ca: the current CA: %w", err)
	}
	now := time.Now()
	if !now.Before(old.NotAfter) {
		return RotateResult{}, fmt.Errorf("x509ca: the CA in %s expired on %s: sensors can no longer renew; initialise a new CA directory and re-enrol them", paths.CACertPath, old.NotAfter.UTC().Format(time.RFC3339))
	}
	if opts.Organization == "" {
		opts.Organization = "RXC"
		if len(old.Subject.Organization) > 0 {
			opts.Organization = old.Subject.Organization[0]
		}
	}
	if opts.CAValidity == 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.CAValidity < 0 {
		return RotateResult{}, fmt.Errorf("x509ca: negative CA validity")
	}
	cert, _, keyPEM, certPEM, err := newCA(opts.Organization, opts.CAValidity, now)
	if err != nil {
		return RotateResult{}, err
	}
	oldKeyPEM, err := marshalKey(oldKey)
	if err != nil {
		return RotateResult{}, err
	}
	// The previous CA is copied aside first: at every step the directory
	// holds a CA whose key matches its certificate (a running control plane
	// keeps its last good state across the one step where ca.key and
	// ca.crt differ).
	if err := createExclusive(filepath.Join(dir, PreviousCAKeyFile), oldKeyPEM); err != nil {
		return RotateResult{}, err
	}
	if err := replaceFile(paths.PreviousCACertPath, oldPEM, 0o644); err != nil {
		return RotateResult{}, err
	}
	if err := replaceFile(paths.CAKeyPath, keyPEM, 0o600); err != nil {
		return RotateResult{}, err
	}
	if err := replaceFile(paths.CACertPath, certPEM, 0o644); err != nil {
		return RotateResult{}, err
	}
	return RotateResult{CANotAfter: cert.NotAfter.UTC(), PreviousCANotAfter: old.NotAfter.UTC()}, nil
}

// FinishRotation ends a CA rotation in dir: when the server certificate is
// still the previous CA's, it issues one from the new CA for the same names
// (every sensor that renewed during the overlap trusts it), then it removes
// the previous CA, whose sensor certificates are refused from then on.
func FinishRotation(dir string, serverValidity time.Duration) (RotateResult, error) {
	paths := Config{Dir: dir}.withDefaults()
	prev, _, err := readCertificate(paths.PreviousCACertPath)
	if errors.Is(err, fs.ErrNotExist) {
		return RotateResult{}, fmt.Errorf("x509ca: %w in %s", ErrNoRotation, dir)
	}
	if err != nil {
		return RotateResult{}, err
	}
	cert, _, key, err := loadCA(paths)
	if err != nil {
		return RotateResult{}, fmt.Errorf("x509ca: the new CA: %w", err)
	}
	server, _, err := readCertificate(paths.ServerCertPath)
	if err != nil {
		return RotateResult{}, err
	}
	res := RotateResult{CANotAfter: cert.NotAfter.UTC(), PreviousCANotAfter: prev.NotAfter.UTC(), ServerNotAfter: server.NotAfter.UTC()}
	if server.CheckSignatureFrom(cert) != nil {
		if serverValidity == 0 {
			serverValidity = DefaultServerValidity
		}
		org := "RXC"
		if len(cert.Subject.Organization) > 0 {
			org = cert.Subject.Organization[0]
		}
		if res.ServerNotAfter, err = issueServer(paths, cert, key, server.DNSNames, server.IPAddresses, org, serverValidity, time.Now()); err != nil {
			return RotateResult{}, err
		}
		res.ServerReissued = true
	}
	if err := os.Remove(paths.PreviousCACertPath); err != nil {
		return RotateResult{}, fmt.Errorf("x509ca: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, PreviousCAKeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return RotateResult{}, fmt.Errorf("x509ca: %w", err)
	}
	return res, nil
}
