package sensorclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rxc-project/rxc/sdk/agentwire"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// Files of a state directory. The key, the creds, the sensor token (in
// sensor.json) and a pending redemption are secrets: mode 0600.
const (
	KeyFile        = "key.pem"
	CertFile       = "cert.pem"
	CAFile         = "ca.pem"
	CredsFile      = "nats.creds"
	SensorFile     = "sensor.json"
	RedemptionFile = "redemption.json"
)

// Errors of StateDir.
var (
	// ErrNoState means the directory holds no enrolled sensor yet.
	ErrNoState = errors.New("no sensor state")
	// ErrInsecureState means a secret file is readable by group or others.
	ErrInsecureState = errors.New("sensor state file is accessible to group or others")
	// ErrKeyMismatch means cert.pem does not belong to key.pem (a renewal
	// of an agent without the renewal journal interrupted between the two
	// writes).
	ErrKeyMismatch = errors.New("certificate does not match the private key")
)

// NATSInfo is everything the sensor needs to address NATS: the enrolment
// answer's nats block without the credentials, kept in sensor.json.
type NATSInfo = agentwire.NATSAddress

// State is an enrolled sensor: its identity, credentials and addresses.
// KeyPEM, CertPEM, CAPEM and Creds live in their own files; the rest is
// sensor.json.
type State struct {
	SensorID    string    `json:"sensorId"`
	TenantID    string    `json:"tenantId"`
	SensorToken string    `json:"sensorToken"`
	NATS        *NATSInfo `json:"nats,omitempty"`
	GRPCAddress string    `json:"grpcAddress"`
	Serial      string    `json:"serial"`
	NotAfter    time.Time `json:"notAfter"`
	// ObtainedAt is when the current certificate arrived; renewal timing
	// counts from here because the CA backdates NotBefore.
	ObtainedAt time.Time `json:"obtainedAt"`
	EnrolledAt time.Time `json:"enrolledAt"`
	// Desired is the last state an operator's command asked for
	// ("running" or "stopped"); agents resume it after a restart.
	Desired ReportedState `json:"desired,omitempty"`
	// RevokedAt is set once the control plane refused the sensor for good.
	RevokedAt *time.Time `json:"revokedAt,omitempty"`

	KeyPEM  []byte `json:"-"`
	CertPEM []byte `json:"-"`
	CAPEM   []byte `json:"-"`
	Creds   []byte `json:"-"`
}

// Clone returns a deep enough copy to modify and save.
func (s *State) Clone() *State {
	c := *s
	if s.NATS != nil {
		n := *s.NATS
		c.NATS = &n
	}
	if s.RevokedAt != nil {
		t := *s.RevokedAt
		c.RevokedAt = &t
	}
	return &c
}

// TLSCertificate returns the client certificate with its key, checking that
// they belong together (ErrKeyMismatch otherwise).
func (s *State) TLSCertificate() (tls.Certificate, error) {
	key, err := parseKeyPEM(s.KeyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := s.Leaf()
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sensor certificate: %w", err)
	}
	if !samePublicKey(leaf, key) {
		return tls.Certificate{}, ErrKeyMismatch
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

// Leaf parses the client certificate.
func (s *State) Leaf() (*x509.Certificate, error) {
	return parseCertPEM(s.CertPEM)
}

// StateDir is a directory holding one sensor's state, mode 0700.
type StateDir struct {
	path string
}

// OpenStateDir creates path (mode 0700) if needed and tightens an existing
// directory to 0700.
func OpenStateDir(path string) (*StateDir, error) {
	if path == "" {
		return nil, errors.New("sensorclient: state directory is required")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("state directory %s is not a directory", path)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(path, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: make it private: %w", err)
		}
	}
	return &StateDir{path: path}, nil
}

// Path is the directory.
func (d *StateDir) Path() string { return d.path }

// Load reads the sensor. It returns ErrNoState when none is enrolled,
// ErrInsecureState when a secret file is group- or world-accessible.
func (d *StateDir) Load() (*State, error) {
	data, err := d.readSecret(SensorFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoState
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", SensorFile, err)
	}
	if st.SensorID == "" || st.TenantID == "" || st.SensorToken == "" {
		return nil, fmt.Errorf("%s: sensorId, tenantId and sensorToken are required", SensorFile)
	}
	if st.KeyPEM, err = d.readSecret(KeyFile); err != nil {
		return nil, err
	}
	if st.CertPEM, err = os.ReadFile(d.file(CertFile)); err != nil {
		return nil, err
	}
	if st.CAPEM, err = os.ReadFile(d.file(CAFile)); err != nil {
		return nil, err
	}
	if st.NATS != nil {
		if st.Creds, err = d.readSecret(CredsFile); err != nil {
			return nil, err
		}
	}
	// The certificate file is the truth about serial and expiry.
	if leaf, err := st.Leaf(); err == nil {
		st.Serial, st.NotAfter = serialHex(leaf), leaf.NotAfter.UTC()
	}
	// A renewal whose answer arrived but whose Save was cut short is
	// finished now.
	return d.completeRenewal(&st)
}

// Save writes every file of st, each atomically. sensor.json goes last, so
// a directory is only ever "enrolled" once everything it names is on disk.
// A renewal's Save is journaled (RenewIn): Load completes one that was
// interrupted between the files.
func (d *StateDir) Save(st *State) error {
	if len(st.KeyPEM) == 0 || len(st.CertPEM) == 0 || len(st.CAPEM) == 0 {
		return errors.New("sensorclient: state without key, certificate or CA")
	}
	files := []struct {
		name string
		data []byte
	}{{KeyFile, st.KeyPEM}, {CertFile, st.CertPEM}, {CAFile, st.CAPEM}}
	if st.NATS != nil {
		files = append(files, struct {
			name string
			data []byte
		}{CredsFile, st.Creds})
	}
	for _, f := range files {
		if err := writeAtomic(d.file(f.name), f.data); err != nil {
			return err
		}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(d.file(SensorFile), append(data, '\n'))
}

// SaveRedemption keeps a redeemed claim code's enrolment token so a crash
// before enrolment does not burn the single-use code.
func (d *StateDir) SaveRedemption(r Redemption) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeAtomic(d.file(RedemptionFile), data)
}

// LoadRedemption returns a saved redemption, or fs.ErrNotExist.
func (d *StateDir) LoadRedemption() (Redemption, error) {
	data, err := d.readSecret(RedemptionFile)
	if err != nil {
		return Redemption{}, err
	}
	var r Redemption
	if err := json.Unmarshal(data, &r); err != nil {
		return Redemption{}, fmt.Errorf("%s: %w", RedemptionFile, err)
	}
	return r, nil
}

// ClearRedemption removes a saved redemption and the key and CSR of its
// enrolment (EnrolmentFile).
func (d *StateDir) ClearRedemption() error {
	for _, name := range []string{RedemptionFile, EnrolmentFile} {
		if err := os.Remove(d.file(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (d *StateDir) file(name string) string { return filepath.Join(d.path, name) }

// readSecret reads a file that must not be accessible to group or others.
func (d *StateDir) readSecret(name string) ([]byte, error) {
	p := d.file(name)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s (mode %04o; chmod 600 it): %w", p, fi.Mode().Perm(), ErrInsecureState)
	}
	return os.ReadFile(p)
}

// writeAtomic replaces path with data, mode 0600.
func writeAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no CERTIFICATE PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

func serialHex(c *x509.Certificate) string { return fmt.Sprintf("%x", c.SerialNumber) }

// samePublicKey reports whether the certificate carries key's public half.
func samePublicKey(c *x509.Certificate, key *ecdsa.PrivateKey) bool {
	pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(key.Public())
}

// parseKeyPEM reads an ECDSA key in PKCS #8 or SEC 1 form.
func parseKeyPEM(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("sensor key: no PEM block")
	}
	if block.Type == "EC PRIVATE KEY" {
		return x509.ParseECPrivateKey(block.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sensor key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("sensor key: not an ECDSA key")
	}
	return ec, nil
}
