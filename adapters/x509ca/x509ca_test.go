package x509ca_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/fleet"
)

// Key generation dominates test time, so each kind is made once.
var (
	rsa2048 = sync.OnceValue(func() crypto.Signer { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	rsa1024 = sync.OnceValue(func() crypto.Signer { return must(rsa.GenerateKey(rand.Reader, 1024)) })
	p224    = sync.OnceValue(func() crypto.Signer { return must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader)) })
	p256    = sync.OnceValue(func() crypto.Signer { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	p384    = sync.OnceValue(func() crypto.Signer { return must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)) })
	p521    = sync.OnceValue(func() crypto.Signer { return must(ecdsa.GenerateKey(elliptic.P521(), rand.Reader)) })
	ed      = sync.OnceValue(func() crypto.Signer {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var testInit = x509ca.InitOptions{DNSNames: []string{"localhost", "cp.example.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}

// initCA initialises a CA with testInit in a fresh directory and returns
// that directory and Init's result.
func initCA(t testing.TB) (string, x509ca.InitResult) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	res, err := x509ca.Init(dir, testInit)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return dir, res
}

// newCA initialises a CA in a fresh directory and loads it with clock now
// (time.Now when nil).
func newCA(t testing.TB, now func() time.Time) (*x509ca.CA, string) {
	t.Helper()
	dir, _ := initCA(t)
	ca, err := x509ca.Load(x509ca.Config{Dir: dir, Now: now})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return ca, dir
}

func csrPEM(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{Subject: pkix.Name{CommonName: "whatever"}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("CreateCertificateRequest: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func parseCert(t testing.TB, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("issued PEM is not exactly one CERTIFICATE block: %q", pemBytes)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("ParseCertificate: %v", err)
	}
	return cert
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, data)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestInitCreatesCAAndServerCertificate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "ca")
	start := time.Now()
	res, err := x509ca.Init(dir, testInit)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if !res.CACreated {
		t.Errorf("CACreated = false, want true for a new directory")
	}

	modes := map[string]os.FileMode{}
	for _, p := range []string{dir, res.CAKeyPath, res.ServerKeyPath} {
		modes[p] = mode(t, p)
	}
	wantModes := map[string]os.FileMode{dir: 0o700, res.CAKeyPath: 0o600, res.ServerKeyPath: 0o600}
	if diff := cmp.Diff(wantModes, modes); diff != "" {
		t.Errorf("file modes (-want +got):\n%s", diff)
	}

	for _, p := range []string{res.CAKeyPath, res.ServerKeyPath} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("%s: not a PKCS#8 PEM block", p)
		}
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if k, ok := key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", p, key)
		}
	}

	caCert := readCert(t, res.CACertPath)
	if err := caCert.CheckSignatureFrom(caCert); err != nil {
		t.Errorf("CA is not self-signed: %v", err)
	}
	type caProfile struct {
		IsCA, BasicConstraintsValid, MaxPathLenZero bool
		MaxPathLen                                  int
		KeyUsage                                    x509.KeyUsage
		HasSKI                                      bool
		YearsValid                                  int
	}
	gotCA := caProfile{
		IsCA: caCert.IsCA, BasicConstraintsValid: caCert.BasicConstraintsValid, MaxPathLenZero: caCert.MaxPathLenZero,
		MaxPathLen: caCert.MaxPathLen, KeyUsage: caCert.KeyUsage, HasSKI: len(caCert.SubjectKeyId) > 0,
		YearsValid: int(caCert.NotAfter.Sub(start).Round(24*time.Hour) / (365 * 24 * time.Hour)),
	}
	wantCA := caProfile{IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true, MaxPathLen: 0,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, HasSKI: true, YearsValid: 10}
	if diff := cmp.Diff(wantCA, gotCA); diff != "" {
		t.Errorf("CA profile (-want +got):\n%s", diff)
	}

	srv := readCert(t, res.ServerCertPath)
	type serverProfile struct {
		IsCA        bool
		ExtKeyUsage []x509.ExtKeyUsage
		DNSNames    []string
		IPs         []string
		DaysValid   int
		AKI         []byte
	}
	ips := []string{}
	for _, ip := range srv.IPAddresses {
		ips = append(ips, ip.String())
	}
	gotSrv := serverProfile{IsCA: srv.IsCA, ExtKeyUsage: srv.ExtKeyUsage, DNSNames: srv.DNSNames, IPs: ips,
		DaysValid: int(srv.NotAfter.Sub(start).Round(24*time.Hour) / (24 * time.Hour)), AKI: srv.AuthorityKeyId}
	wantSrv := serverProfile{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: testInit.DNSNames, IPs: []string{"127.0.0.1"}, DaysValid: 365, AKI: caCert.SubjectKeyId}
	if diff := cmp.Diff(wantSrv, gotSrv); diff != "" {
		t.Errorf("server certificate profile (-want +got):\n%s", diff)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: "cp.example.test"}); err != nil {
		t.Errorf("server certificate does not verify for its DNS name: %v", err)
	}
}

func TestInitReusesExistingCA(t *testing.T) {
	t.Parallel()
	dir, first := initCA(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caKey, caCert, srvCert := read(first.CAKeyPath), read(first.CACertPath), read(first.ServerCertPath)

	// The same names again keep the certificate.
	kept, err := x509ca.Init(dir, testInit)
	if err != nil || !kept.ServerKept || kept.CACreated {
		t.Fatalf("Init with the same names: %+v, %v; want the server certificate kept", kept, err)
	}
	if !bytes.Equal(read(first.ServerCertPath), srvCert) {
		t.Fatal("Init with the same names rewrote the server certificate")
	}

	// Other names are refused unless replacing was asked for.
	opts := testInit
	opts.DNSNames = []string{"new.example.test"}
	if _, err := x509ca.Init(dir, opts); !errors.Is(err, x509ca.ErrServerCertExists) || !strings.Contains(err.Error(), "--replace-server-cert") {
		t.Fatalf("Init with other names: %v, want ErrServerCertExists naming --replace-server-cert", err)
	}
	if !bytes.Equal(read(first.ServerCertPath), srvCert) || !bytes.Equal(read(first.CAKeyPath), caKey) {
		t.Fatal("a refused Init changed the files")
	}
	opts.ReplaceServerCert = true
	second, err := x509ca.Init(dir, opts)
	if err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if second.CACreated {
		t.Errorf("CACreated = true on a directory that already holds a CA")
	}
	if !bytes.Equal(read(second.CAKeyPath), caKey) || !bytes.Equal(read(second.CACertPath), caCert) {
		t.Errorf("existing CA key or certificate was rewritten")
	}
	if bytes.Equal(read(second.ServerCertPath), srvCert) {
		t.Errorf("server certificate was not reissued")
	}
	if got, want := readCert(t, second.ServerCertPath).DNSNames, opts.DNSNames; !cmp.Equal(got, want) {
		t.Errorf("reissued server DNS names = %v, want %v", got, want)
	}
	if _, err := x509ca.Load(x509ca.Config{Dir: dir}); err != nil {
		t.Errorf("Load after reissue: %v", err)
	}
}

func TestInitRefusesUnsafeState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"certificate without key", func(t *testing.T, dir string) {
			if _, err := x509ca.Init(dir, testInit); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, "ca.key")); err != nil {
				t.Fatal(err)
			}
		}},
		{"existing key readable by others", func(t *testing.T, dir string) {
			if _, err := x509ca.Init(dir, testInit); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, "ca.key"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory open to others", func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired CA", func(t *testing.T, dir string) {
			// Certificate times have whole seconds, so a CA valid for 1ns
			// has already expired when Init runs again.
			opts := testInit
			opts.CAValidity = time.Nanosecond
			if _, err := x509ca.Init(dir, opts); err != nil {
				t.Fatal(err)
			}
		}},
		{"key that is not a key", func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "ca.key"), []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "ca")
			tt.setup(t, dir)
			before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
			if _, err := x509ca.Init(dir, testInit); err == nil {
				t.Fatalf("Init succeeded, want an error")
			}
			after, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
			if !bytes.Equal(before, after) {
				t.Errorf("ca.key changed")
			}
		})
	}
}

func TestInitNeedsAServerName(t *testing.T) {
	t.Parallel()
	_, err := x509ca.Init(filepath.Join(t.TempDir(), "ca"), x509ca.InitOptions{})
	if !errors.Is(err, fleet.ErrInvalidInput) {
		t.Errorf("Init without SANs: err = %v, want %v", err, fleet.ErrInvalidInput)
	}
}

func TestLoadRefusesExposedOrMismatchedKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		wantText string
	}{
		{"CA key 0644", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "ca.key"), 0o644) }, "ca.key"},
		{"CA key 0640", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "ca.key"), 0o640) }, "ca.key"},
		{"server key 0604", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "server.key"), 0o604) }, "server.key"},
		{"CA key from another CA", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "other")
			if _, err := x509ca.Init(other, testInit); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, "ca.key"), filepath.Join(dir, "ca.key"))
		}, "does not match"},
		{"server certificate from another CA", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "other")
			if _, err := x509ca.Init(other, testInit); err != nil {
				t.Fatal(err)
			}
			copyFile(t, filepath.Join(other, "server.key"), filepath.Join(dir, "server.key"))
			copyFile(t, filepath.Join(other, "server.crt"), filepath.Join(dir, "server.crt"))
		}, "not a valid server certificate"},
		{"missing server key", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "server.key")); err != nil {
				t.Fatal(err)
			}
		}, "server.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := initCA(t)
			tt.setup(t, dir)
			_, err := x509ca.Load(x509ca.Config{Dir: dir})
			if err == nil {
				t.Fatalf("Load succeeded, want an error mentioning %q", tt.wantText)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Load error = %q, want it to mention %q", err, tt.wantText)
			}
		})
	}
}

func TestLoadExplicitPaths(t *testing.T) {
	t.Parallel()
	_, res := initCA(t)
	ca, err := x509ca.Load(x509ca.Config{CACertPath: res.CACertPath, CAKeyPath: res.CAKeyPath, ServerCertPath: res.ServerCertPath, ServerKeyPath: res.ServerKeyPath})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want, err := os.ReadFile(res.CACertPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(ca.CACertificatePEM())); diff != "" {
		t.Errorf("CACertificatePEM (-file +got):\n%s", diff)
	}
}

func chmod(t *testing.T, path string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSignCSRKeyTypes(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, nil)
	tests := []struct {
		name       string
		key        func() crypto.Signer
		wantErr    error
		wantEncrpt bool
	}{
		{"ECDSA P-256", p256, nil, false},
		{"ECDSA P-384", p384, nil, false},
		{"Ed25519", ed, nil, false},
		{"RSA 2048", rsa2048, nil, true},
		{"RSA 1024 refused", rsa1024, fleet.ErrInvalidCSR, false},
		{"ECDSA P-224 refused", p224, fleet.ErrInvalidCSR, false},
		{"ECDSA P-521 refused", p521, fleet.ErrInvalidCSR, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := tt.key()
			got, err := ca.SignCSR(fleet.CertRequest{CSRPEM: csrPEM(t, key, nil), TenantID: "acme", SensorID: "s1"})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("SignCSR err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			cert := parseCert(t, got.CertificatePEM)
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(cert.PublicKey) {
				t.Errorf("issued certificate does not carry the CSR's public key")
			}
			if gotEnc := cert.KeyUsage&x509.KeyUsageKeyEncipherment != 0; gotEnc != tt.wantEncrpt {
				t.Errorf("KeyEncipherment = %v, want %v", gotEnc, tt.wantEncrpt)
			}
		})
	}
}

func TestSignCSRRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, nil)
	good := csrPEM(t, p256(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "aaaa"}})
	block, _ := pem.Decode(good)

	tampered := bytes.Clone(block.Bytes)
	i := bytes.Index(tampered, []byte("aaaa"))
	tampered[i] = 'b'
	keyDER := must(x509.MarshalPKCS8PrivateKey(p256()))

	tests := []struct {
		name  string
		input []byte
	}{
		{"empty", nil},
		{"garbage", []byte("not a csr")},
		{"DER instead of PEM", block.Bytes},
		{"certificate block", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})},
		{"legacy NEW CERTIFICATE REQUEST label", pem.EncodeToMemory(&pem.Block{Type: "NEW CERTIFICATE REQUEST", Bytes: block.Bytes})},
		{"two CSR blocks", append(bytes.Clone(good), good...)},
		{"CSR then private key", append(bytes.Clone(good), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)},
		{"text before the block", append([]byte("hello\n"), good...)},
		{"text after the block", append(bytes.Clone(good), "trailer"...)},
		{"PEM headers", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: block.Bytes})},
		{"truncated DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: block.Bytes[:len(block.Bytes)/2]})},
		{"bad signature", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered})},
		{"over the size limit", append(bytes.Clone(good), bytes.Repeat([]byte("\n"), x509ca.MaxCSRSize)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ca.SignCSR(fleet.CertRequest{CSRPEM: tt.input, TenantID: "acme", SensorID: "s1"})
			if !errors.Is(err, fleet.ErrInvalidCSR) {
				t.Errorf("SignCSR err = %v, want %v", err, fleet.ErrInvalidCSR)
			}
		})
	}

	// The same CSR with surrounding white space only is fine: the refusals
	// above are about the extra content, not about PEM framing.
	if _, err := ca.SignCSR(fleet.CertRequest{CSRPEM: append(append([]byte("\n  "), good...), "\n\n"...), TenantID: "acme", SensorID: "s1"}); err != nil {
		t.Errorf("SignCSR with surrounding white space: %v", err)
	}
}

func TestSignCSRRefusesInvalidRequest(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, nil)
	csr := csrPEM(t, p256(), nil)
	tests := []struct {
		name string
		req  fleet.CertRequest
	}{
		{"empty tenant", fleet.CertRequest{CSRPEM: csr, SensorID: "s1"}},
		{"tenant with a colon", fleet.CertRequest{CSRPEM: csr, TenantID: "a:b", SensorID: "s1"}},
		{"sensor with a dot", fleet.CertRequest{CSRPEM: csr, TenantID: "acme", SensorID: "s.1"}},
		{"negative TTL", fleet.CertRequest{CSRPEM: csr, TenantID: "acme", SensorID: "s1", TTL: -time.Hour}},
		{"TTL beyond the CA", fleet.CertRequest{CSRPEM: csr, TenantID: "acme", SensorID: "s1", TTL: 20 * 365 * 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ca.SignCSR(tt.req); !errors.Is(err, fleet.ErrInvalidInput) {
				t.Errorf("SignCSR err = %v, want %v", err, fleet.ErrInvalidInput)
			}
		})
	}
}

// sensorProfile is what a sensor certificate must say, field by field.
type sensorProfile struct {
	Subject               string
	Issuer                string
	URIs                  []string
	DNSNames              []string
	EmailAddresses        []string
	IPAddresses           []net.IP
	ExtKeyUsage           []x509.ExtKeyUsage
	UnknownExtKeyUsage    []asn1.ObjectIdentifier
	KeyUsage              x509.KeyUsage
	IsCA                  bool
	BasicConstraintsValid bool
	AuthorityKeyID        []byte
	NotBefore, NotAfter   time.Time
	SerialHex             string
	SerialBits            int
}

func profileOf(c *x509.Certificate) sensorProfile {
	uris := []string{}
	for _, u := range c.URIs {
		uris = append(uris, u.String())
	}
	return sensorProfile{
		Subject: c.Subject.String(), Issuer: c.Issuer.String(), URIs: uris,
		DNSNames: c.DNSNames, EmailAddresses: c.EmailAddresses, IPAddresses: c.IPAddresses,
		ExtKeyUsage: c.ExtKeyUsage, UnknownExtKeyUsage: c.UnknownExtKeyUsage, KeyUsage: c.KeyUsage,
		IsCA: c.IsCA, BasicConstraintsValid: c.BasicConstraintsValid, AuthorityKeyID: c.AuthorityKeyId,
		NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		SerialHex: c.SerialNumber.Text(16), SerialBits: c.SerialNumber.BitLen(),
	}
}

func TestSignCSRProfileIgnoresTheRequest(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Second)
	ca, _ := newCA(t, func() time.Time { return now })
	caCert := ca.Certificate()

	evilURI := must(url.Parse("urn:rxc:sensor:other-tenant:other-sensor"))
	isCA := must(asn1.Marshal(struct {
		IsCA bool
	}{true}))
	tests := []struct {
		name string
		key  crypto.Signer
		tmpl *x509.CertificateRequest
		ttl  time.Duration
	}{
		{"plain request, default TTL", p256(), &x509.CertificateRequest{}, 0},
		{"hostile request, explicit TTL", p256(), &x509.CertificateRequest{
			Subject:         pkix.Name{CommonName: "admin", Organization: []string{"Evil"}},
			DNSNames:        []string{"control-plane.example.test"},
			EmailAddresses:  []string{"root@example.test"},
			IPAddresses:     []net.IP{net.IPv4(10, 0, 0, 1)},
			URIs:            []*url.URL{evilURI},
			ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: isCA}},
		}, time.Hour},
		{"RSA request", rsa2048(), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			issued, err := ca.SignCSR(fleet.CertRequest{CSRPEM: csrPEM(t, tt.key, tt.tmpl), TenantID: "acme", SensorID: "sensor-7", TTL: tt.ttl})
			if err != nil {
				t.Fatalf("SignCSR: %v", err)
			}
			cert := parseCert(t, issued.CertificatePEM)
			ttl := tt.ttl
			if ttl == 0 {
				ttl = 168 * time.Hour
			}
			usage := x509.KeyUsageDigitalSignature
			if _, ok := tt.key.(*rsa.PrivateKey); ok {
				usage |= x509.KeyUsageKeyEncipherment
			}
			want := sensorProfile{
				Subject:               "CN=sensor-7",
				Issuer:                caCert.Subject.String(),
				URIs:                  []string{"urn:rxc:sensor:acme:sensor-7"},
				ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
				KeyUsage:              usage,
				BasicConstraintsValid: true,
				AuthorityKeyID:        caCert.SubjectKeyId,
				NotBefore:             now.Add(-time.Minute),
				NotAfter:              now.Add(ttl),
				SerialHex:             issued.Serial,
				SerialBits:            128,
			}
			if diff := cmp.Diff(want, profileOf(cert)); diff != "" {
				t.Errorf("certificate profile (-want +got):\n%s", diff)
			}
			if !issued.NotBefore.Equal(want.NotBefore) || !issued.NotAfter.Equal(want.NotAfter) {
				t.Errorf("reported validity %s..%s, want %s..%s", issued.NotBefore, issued.NotAfter, want.NotBefore, want.NotAfter)
			}
			if issued.Serial != strings.ToLower(issued.Serial) {
				t.Errorf("serial %q is not lower-case", issued.Serial)
			}
			roots := x509.NewCertPool()
			roots.AddCert(caCert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("certificate does not verify as a client certificate of the CA: %v", err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
				t.Errorf("sensor certificate verifies for serverAuth, want clientAuth only")
			}
			tenant, sensor, err := x509ca.SensorIdentity(cert)
			if err != nil || tenant != "acme" || sensor != "sensor-7" {
				t.Errorf("SensorIdentity = %q, %q, %v; want acme, sensor-7, nil", tenant, sensor, err)
			}
		})
	}
}

func TestSerialsAreRandom128Bit(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, nil)
	csr := csrPEM(t, p256(), nil)
	const n = 64
	seen := map[string]bool{}
	and := new(big.Int).Lsh(big.NewInt(1), 128)
	and.Sub(and, big.NewInt(1))
	or := new(big.Int)
	for range n {
		issued, err := ca.SignCSR(fleet.CertRequest{CSRPEM: csr, TenantID: "acme", SensorID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		serial, ok := new(big.Int).SetString(issued.Serial, 16)
		if !ok || serial.Sign() <= 0 || serial.BitLen() != 128 || len(issued.Serial) != 32 {
			t.Fatalf("serial %q: want a positive 128-bit number in 32 hex digits", issued.Serial)
		}
		if seen[issued.Serial] {
			t.Fatalf("serial %s issued twice", issued.Serial)
		}
		seen[issued.Serial] = true
		and.And(and, serial)
		or.Or(or, serial)
	}
	// Over 64 serials every one of the 127 random bits should have been both
	// 0 and 1; a stuck bit fails this with probability 2^-63 per bit.
	random := new(big.Int).Lsh(big.NewInt(1), 127)
	random.Sub(random, big.NewInt(1))
	if got := new(big.Int).And(and, random); got.Sign() != 0 {
		t.Errorf("bits always set across serials: %x", got)
	}
	if got := new(big.Int).And(or, random); got.Cmp(random) != 0 {
		t.Errorf("bits never set across serials: %x", new(big.Int).Xor(got, random))
	}
}

func TestSensorIdentity(t *testing.T) {
	t.Parallel()
	cert := func(cn string, uris ...string) *x509.Certificate {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		for _, u := range uris {
			c.URIs = append(c.URIs, must(url.Parse(u)))
		}
		return c
	}
	tests := []struct {
		name       string
		cert       *x509.Certificate
		wantTenant string
		wantSensor string
		wantErr    bool
	}{
		{"valid", cert("s-1", "urn:rxc:sensor:acme:s-1"), "acme", "s-1", false},
		{"nil certificate", nil, "", "", true},
		{"no URI", cert("s-1"), "", "", true},
		{"two sensor URIs", cert("s-1", "urn:rxc:sensor:acme:s-1", "urn:rxc:sensor:acme:s-1"), "", "", true},
		{"extra unrelated URI", cert("s-1", "urn:rxc:sensor:acme:s-1", "https://example.test/"), "", "", true},
		{"other scheme", cert("s-1", "https://example.test/rxc:sensor:acme:s-1"), "", "", true},
		{"other namespace", cert("s-1", "urn:rxc:operator:acme:s-1"), "", "", true},
		{"upper-case namespace", cert("s-1", "urn:RXC:sensor:acme:s-1"), "", "", true},
		{"missing sensor", cert("acme", "urn:rxc:sensor:acme"), "", "", true},
		{"empty sensor", cert("", "urn:rxc:sensor:acme:"), "", "", true},
		{"extra segment", cert("s-1:x", "urn:rxc:sensor:acme:s-1:x"), "", "", true},
		{"invalid tenant id", cert("s-1", "urn:rxc:sensor:ac.me:s-1"), "", "", true},
		{"query", cert("s-1", "urn:rxc:sensor:acme:s-1?x=1"), "", "", true},
		{"escaped", cert("s-1", "urn:rxc:sensor:acme:s%2D1"), "", "", true},
		{"common name differs", cert("s-2", "urn:rxc:sensor:acme:s-1"), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tenant, sensor, err := x509ca.SensorIdentity(tt.cert)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("SensorIdentity err = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, x509ca.ErrNoSensorIdentity) {
				t.Errorf("err = %v, want it to wrap ErrNoSensorIdentity", err)
			}
			if tenant != tt.wantTenant || sensor != tt.wantSensor {
				t.Errorf("SensorIdentity = %q, %q; want %q, %q", tenant, sensor, tt.wantTenant, tt.wantSensor)
			}
		})
	}
}

// TestMutualTLS runs real TLS 1.3 handshakes on loopback with the
// configurations the CA builds.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	ca, _ := newCA(t, nil)
	other, _ := newCA(t, nil)
	sensorCert := func(ca *x509ca.CA) tls.Certificate {
		key := p256()
		issued, err := ca.SignCSR(fleet.CertRequest{CSRPEM: csrPEM(t, key, nil), TenantID: "acme", SensorID: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{parseCert(t, issued.CertificatePEM).Raw}, PrivateKey: key}
	}
	tests := []struct {
		name    string
		client  *tls.Config
		wantErr bool
	}{
		{"sensor of this CA", ca.ClientTLSConfig(sensorCert(ca), "localhost"), false},
		{"no client certificate", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.ServerTLSConfig().ClientCAs, ServerName: "localhost"}, true},
		{"sensor of another CA", ca.ClientTLSConfig(sensorCert(other), "localhost"), true},
		{"TLS 1.2 only", func() *tls.Config {
			c := ca.ClientTLSConfig(sensorCert(ca), "localhost")
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lis, err := tls.Listen("tcp", "127.0.0.1:0", ca.ServerTLSConfig())
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			serverErr := make(chan error, 1)
			go func() {
				conn, err := lis.Accept()
				if err != nil {
					serverErr <- err
					return
				}
				defer conn.Close()
				tc := conn.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					serverErr <- err
					return
				}
				_, err = tc.Write([]byte("ok"))
				serverErr <- err
			}()
			conn, err := tls.Dial("tcp", lis.Addr().String(), tt.client)
			if err == nil {
				buf := make([]byte, 2)
				_, err = conn.Read(buf)
				conn.Close()
			}
			srvErr := <-serverErr
			if gotErr := srvErr != nil; gotErr != tt.wantErr {
				t.Errorf("server handshake err = %v, want error: %v (client err %v)", srvErr, tt.wantErr, err)
			}
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Errorf("client err = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}
