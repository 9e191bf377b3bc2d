package x509ca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/sdk/atomicfile"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// InitOptions describe the CA and server certificate Init creates.
type InitOptions struct {
	// DNSNames and IPAddresses are the server certificate's SANs: the names
	// sensors dial. At least one is required.
	DNSNames    []string
	IPAddresses []net.IP
	// Organization goes into both subjects; default "RXC".
	Organization string
	// CAValidity defaults to DefaultCAValidity, ServerValidity to
	// DefaultServerValidity.
	CAValidity     time.Duration
	ServerValidity time.Duration
	// ReplaceServerCert issues a new server certificate even when one
	// exists. Without it an existing, unexpired certificate for the same
	// names is kept, and one for other names (or expired) is refused with
	// ErrServerCertExists: replacing it changes what every sensor dials.
	ReplaceServerCert bool
}

// ErrServerCertExists is Init refusing to replace a server certificate it
// was not asked to replace.
var ErrServerCertExists = errors.New("a server certificate exists")

// InitResult reports what Init did.
type InitResult struct {
	// CACreated is false when an existing CA was reused.
	CACreated bool
	// ServerKept is true when the existing server certificate already had
	// the requested names and was kept.
	ServerKept     bool
	CACertPath     string
	CAKeyPath      string
	ServerCertPath string
	ServerKeyPath  string
	CANotAfter     time.Time
	ServerNotAfter time.Time
}

// Init creates a CA in dir (ca.crt, ca.key) unless one exists, and issues a
// fresh server certificate (server.crt, server.key) signed by it. dir is
// created with mode 0700 and keys with 0600. The CA key is created
// exclusively and never replaced: with an existing CA, only the server
// certificate and key are (re)written.
func Init(dir string, opts InitOptions) (InitResult, error) {
	if len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		return InitResult{}, fmt.Errorf("%w: the server certificate needs at least one DNS name or IP address", fleet.ErrInvalidInput)
	}
	if opts.Organization == "" {
		opts.Organization = "RXC"
	}
	if opts.CAValidity == 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.ServerValidity == 0 {
		opts.ServerValidity = DefaultServerValidity
	}
	if opts.CAValidity < 0 || opts.ServerValidity < 0 {
		return InitResult{}, fmt.Errorf("%w: negative validity", fleet.ErrInvalidInput)
	}
	if err := ensurePrivateDir(dir); err != nil {
		return InitResult{}, err
	}
	paths := Config{Dir: dir}.withDefaults()
	res := InitResult{
		CACertPath:     paths.CACertPath,
		CAKeyPath:      paths.CAKeyPath,
		ServerCertPath: paths.ServerCertPath,
		ServerKeyPath:  paths.ServerKeyPath,
	}
	now := time.Now()

	var keep *x509.Certificate
	if !opts.ReplaceServerCert {
		existing, _, err := readCertificate(paths.ServerCertPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return InitResult{}, err
		case sameNames(existing, opts) && now.Before(existing.NotAfter):
			keep = existing
		default:
			return InitResult{}, fmt.Errorf("%w: %s is for %s, valid until %s; sensors dial those names. Pass --replace-server-cert to issue one for %s",
				ErrServerCertExists, paths.ServerCertPath, describeNames(existing.DNSNames, existing.IPAddresses),
				existing.NotAfter.UTC().Format(time.RFC3339), describeNames(opts.DNSNames, opts.IPAddresses))
		}
	}

	cert, key, created, err := loadOrCreateCA(paths, opts, now)
	if err != nil {
		return InitResult{}, err
	}
	res.CACreated = created
	res.CANotAfter = cert.NotAfter
	if keep != nil {
		if err := keep.CheckSignatureFrom(cert); err != nil {
			return InitResult{}, fmt.Errorf("%w: %s was not signed by the CA in %s; pass --replace-server-cert to issue one", ErrServerCertExists, paths.ServerCertPath, paths.CACertPath)
		}
		res.ServerKept = true
		res.ServerNotAfter = keep.NotAfter.UTC()
		return res, nil
	}

	notAfter, err := issueServer(paths, cert, key, opts.DNSNames, opts.IPAddresses, opts.Organization, opts.ServerValidity, now)
	if err != nil {
		return InitResult{}, err
	}
	res.ServerNotAfter = notAfter
	return res, nil
}

// issueServer writes a new server key and certificate for the names,
// signed by the CA cert/key, valid for validity but not beyond the CA.
func issueServer(paths Config, cert *x509.Certificate, key crypto.Signer, dns []string, ips []net.IP, org string, validity time.Duration, now time.Time) (time.Time, error) {
	serverNotAfter := now.Add(validity)
	if serverNotAfter.After(cert.NotAfter) {
		serverNotAfter = cert.NotAfter
	}
	serverKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return time.Time{}, fmt.Errorf("x509ca: server key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return time.Time{}, err
	}
	commonName := "rxc-control-plane"
	if len(dns) > 0 {
		commonName = dns[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{org}},
		DNSNames:              dns,
		IPAddresses:           ips,
		NotBefore:             now.Add(-backdate),
		NotAfter:              serverNotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		AuthorityKeyId:        cert.SubjectKeyId,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cert, &serverKey.PublicKey, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("x509ca: sign server certificate: %w", err)
	}
	keyPEM, err := marshalKey(serverKey)
	if err != nil {
		return time.Time{}, err
	}
	// The key goes first: a certificate next to a stale key would fail to load,
	// a key next to a stale certificate too, but Load says which (and a
	// running CA keeps its last good files until both are in place).
	if err := replaceFile(paths.ServerKeyPath, keyPEM, 0o600); err != nil {
		return time.Time{}, err
	}
	if err := replaceFile(paths.ServerCertPath, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), 0o644); err != nil {
		return time.Time{}, err
	}
	return tmpl.NotAfter.UTC().Truncate(time.Second), nil
}

func loadOrCreateCA(paths Config, opts InitOptions, now time.Time) (*x509.Certificate, crypto.Signer, bool, error) {
	_, keyErr := os.Lstat(paths.CAKeyPath)
	_, certErr := os.Lstat(paths.CACertPath)
	switch {
	case keyErr == nil:
		cert, _, key, err := loadCA(paths)
		if err != nil {
			return nil, nil, false, fmt.Errorf("x509ca: reusing the existing CA: %w", err)
		}
		if !now.Before(cert.NotAfter) {
			return nil, nil, false, fmt.Errorf("x509ca: the CA in %s expired on %s: initialise a new CA directory and re-enrol sensors", paths.CACertPath, cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return cert, key, false, nil
	case !errors.Is(keyErr, fs.ErrNotExist):
		return nil, nil, false, fmt.Errorf("x509ca: %w", keyErr)
	case certErr == nil:
		return nil, nil, false, fmt.Errorf("x509ca: %s exists without %s: refusing to replace a CA certificate; move it away or restore its key", paths.CACertPath, paths.CAKeyPath)
	}

	cert, key, keyPEM, certPEM, err := newCA(opts.Organization, opts.CAValidity, now)
	if err != nil {
		return nil, nil, false, err
	}
	if err := createExclusive(paths.CAKeyPath, keyPEM); err != nil {
		return nil, nil, false, err
	}
	if err := replaceFile(paths.CACertPath, certPEM, 0o644); err != nil {
		return nil, nil, false, err
	}
	return cert, key, true, nil
}

// newCA makes a CA key and its self-signed certificate, and their PEM.
func newCA(org string, validity time.Duration, now time.Time) (*x509.Certificate, crypto.Signer, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("x509ca: CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: org + " sensor CA", Organization: []string{org}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("x509ca: self-sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("x509ca: parse CA certificate: %w", err)
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cert, key, keyPEM, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}), nil
}

// Config locates a CA on disk. Explicit paths win over Dir.
type Config struct {
	Dir            string
	CACertPath     string
	CAKeyPath      string
	ServerCertPath string
	ServerKeyPath  string
	// PreviousCACertPath is the CA being retired during a rotation
	// (previous-ca.crt); it need not exist.
	PreviousCACertPath string
	// Now is the clock used for issued certificates; default time.Now.
	Now func() time.Time
	// Logger reports files that changed and did not load; default discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(p *string, name string) {
		if *p == "" && c.Dir != "" {
			*p = filepath.Join(c.Dir, name)
		}
	}
	def(&c.CACertPath, CACertFile)
	def(&c.CAKeyPath, CAKeyFile)
	def(&c.ServerCertPath, ServerCertFile)
	def(&c.ServerKeyPath, ServerKeyFile)
	def(&c.PreviousCACertPath, PreviousCACertFile)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Load reads the CA and the server certificate. It refuses key files that
// group or others can read, a key that does not match its certificate, a CA
// certificate that is not a CA, and a server certificate neither the CA nor
// (during a rotation) the previous CA signed.
func Load(cfg Config) (*CA, error) {
	cfg = cfg.withDefaults()
	for _, p := range []struct{ name, path string }{
		{"CA certificate", cfg.CACertPath}, {"CA key", cfg.CAKeyPath},
		{"server certificate", cfg.ServerCertPath}, {"server key", cfg.ServerKeyPath},
	} {
		if p.path == "" {
			return nil, fmt.Errorf("x509ca: no %s path (set Dir or the explicit path)", p.name)
		}
	}
	st, err := loadState(cfg)
	if err != nil {
		return nil, err
	}
	ca := &CA{cfg: cfg}
	ca.st.Store(st)
	return ca, nil
}

// current is the state of the files now: when any of them changed since the
// state in use was read, they are read again; when they do not load (a
// rotation half done, a mismatched key) the state in use stays, and the
// failure is logged once per change.
func (ca *CA) current() *caState {
	st := ca.st.Load()
	now := stampOf(ca.cfg)
	if now == st.stamp {
		return st
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if st = ca.st.Load(); now == st.stamp || now == ca.failed {
		return st
	}
	next, err := loadState(ca.cfg)
	if err != nil {
		ca.failed = now
		ca.cfg.Logger.Error("sensor CA files changed but do not load; still using the previous ones", "dir", filepath.Dir(ca.cfg.CACertPath), logkey.Error, err)
		return st
	}
	ca.failed = stamp{}
	ca.st.Store(next)
	ca.cfg.Logger.Info("sensor CA files reloaded", "ca_subject", next.cert.Subject.CommonName, "ca_not_after", next.cert.NotAfter.UTC(),
		"previous_ca", next.previous != nil, "server_not_after", next.server.Leaf.NotAfter.UTC())
	return next
}

// stamp identifies the contents of the CA's files without reading them:
// inode, size and modification time of each (atomic replacement changes
// the inode).
type stamp [5]fileStamp

type fileStamp struct {
	ino, size, mtime int64
	exists           bool
}

func stampOf(cfg Config) stamp {
	var s stamp
	for i, p := range []string{cfg.CACertPath, cfg.CAKeyPath, cfg.ServerCertPath, cfg.ServerKeyPath, cfg.PreviousCACertPath} {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		s[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), exists: true}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			s[i].ino = int64(sys.Ino)
		}
	}
	return s
}

// loadState reads the files once, consistently: the stamp is taken before
// and must be the same after, or the read is retried.
func loadState(cfg Config) (*caState, error) {
	for attempt := 0; ; attempt++ {
		before := stampOf(cfg)
		st, err := readState(cfg)
		if err != nil {
			return nil, err
		}
		if st.stamp = stampOf(cfg); st.stamp == before || attempt == 3 {
			return st, nil
		}
	}
}

func readState(cfg Config) (*caState, error) {
	cert, certPEM, key, err := loadCA(cfg)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	bundle := bytes.Clone(certPEM)
	var previous *x509.Certificate
	if cfg.PreviousCACertPath != "" {
		prev, prevPEM, err := readCertificate(cfg.PreviousCACertPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case !prev.IsCA || prev.KeyUsage&x509.KeyUsageCertSign == 0:
			return nil, fmt.Errorf("x509ca: %s is not a CA certificate", cfg.PreviousCACertPath)
		case prev.Equal(cert):
		default:
			previous = prev
			pool.AddCert(prev)
			bundle = append(bundle, prevPEM...)
		}
	}

	serverCert, _, err := readCertificate(cfg.ServerCertPath)
	if err != nil {
		return nil, err
	}
	serverKey, err := readKey(cfg.ServerKeyPath)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(serverCert.PublicKey, serverKey.Public()) {
		return nil, fmt.Errorf("x509ca: %s does not match %s", cfg.ServerKeyPath, cfg.ServerCertPath)
	}
	if _, err := serverCert.Verify(x509.VerifyOptions{
		Roots:       pool,
		CurrentTime: cfg.Now(),
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("x509ca: %s is not a valid server certificate of this CA: %w", cfg.ServerCertPath, err)
	}
	server := tls.Certificate{Certificate: [][]byte{serverCert.Raw}, PrivateKey: serverKey, Leaf: serverCert}
	return &caState{
		cert:     cert,
		key:      key,
		previous: previous,
		bundle:   bundle,
		server:   server,
		pool:     pool,
		tls: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{server},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
		},
	}, nil
}

func loadCA(cfg Config) (*x509.Certificate, []byte, crypto.Signer, error) {
	cert, certPEM, err := readCertificate(cfg.CACertPath)
	if err != nil {
		return nil, nil, nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, nil, fmt.Errorf("x509ca: %s is not a CA certificate", cfg.CACertPath)
	}
	key, err := readKey(cfg.CAKeyPath)
	if err != nil {
		return nil, nil, nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, nil, nil, fmt.Errorf("x509ca: %s does not match %s", cfg.CAKeyPath, cfg.CACertPath)
	}
	return cert, certPEM, key, nil
}

func readCertificate(path string) (*x509.Certificate, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("x509ca: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemCertificate {
		return nil, nil, fmt.Errorf("x509ca: %s: no PEM %q block", path, pemCertificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("x509ca: %s: %w", path, err)
	}
	return cert, pem.EncodeToMemory(block), nil
}

// readKey refuses a key file group or others can read before reading it, so
// that a leaked key is noticed rather than used.
func readKey(path string) (crypto.Signer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("x509ca: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("x509ca: key file %s has mode %04o: it must not be accessible to group or others (chmod 600 %s)", path, mode, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("x509ca: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemPrivateKey {
		return nil, fmt.Errorf("x509ca: %s: no PEM %q (PKCS#8) block", path, pemPrivateKey)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("x509ca: %s: %w", path, err)
	}
	signer, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("x509ca: %s: key type %T cannot sign", path, parsed)
	}
	return signer, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}

func marshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("x509ca: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

// ensurePrivateDir creates dir with mode 0700, or checks that an existing
// one is not open to group or others.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("x509ca: %w", err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("x509ca: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("x509ca: %s is not a directory", dir)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return fmt.Errorf("x509ca: directory %s has mode %04o: it must not be accessible to group or others (chmod 700 %s)", dir, mode, dir)
	}
	return nil
}

// createExclusive writes a new key file, failing if the path exists.
func createExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("x509ca: create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("x509ca: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("x509ca: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("x509ca: close %s: %w", path, err)
	}
	return nil
}

// replaceFile replaces path with data so that a reader never sees half a
// file.
func replaceFile(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.Write(path, data, mode); err != nil {
		return fmt.Errorf("x509ca: write %s: %w", path, err)
	}
	return nil
}

// sameNames tells whether c has exactly the requested names (in any order).
func sameNames(c *x509.Certificate, opts InitOptions) bool {
	return describeNames(c.DNSNames, c.IPAddresses) == describeNames(opts.DNSNames, opts.IPAddresses)
}

// describeNames is a canonical, readable list of names.
func describeNames(dns []string, ips []net.IP) string {
	var names []string
	for _, d := range dns {
		names = append(names, "DNS:"+strings.ToLower(d))
	}
	for _, ip := range ips {
		names = append(names, "IP:"+ip.String())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
