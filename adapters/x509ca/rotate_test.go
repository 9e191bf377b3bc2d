package x509ca_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/core/fleet"
)

// tlsServer accepts connections with cfg until the test ends; each
// completed handshake gets "ok".
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("ok"))
				}
			}(conn)
		}
	}()
	return lis.Addr().String()
}

// dial connects as a sensor trusting caPEM with cert and returns the
// server certificate it saw, or the error of either side.
func dial(addr string, caPEM []byte, cert tls.Certificate) (*x509.Certificate, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	state, err := exchange(addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "localhost"})
	if err != nil {
		return nil, err
	}
	return state.PeerCertificates[0], nil
}

// exchange dials addr with cfg and reads the server's "ok": the
// connection's state once the handshake is done, and the error of either
// side (with the state so far when the read fails).
func exchange(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2)
	_, err = conn.Read(buf)
	return conn.ConnectionState(), err
}

func sensorTLSCert(t *testing.T, ca *x509ca.CA) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key := p256()
	issued, err := ca.SignCSR(fleet.CertRequest{CSRPEM: csrPEM(t, key, nil), TenantID: "acme", SensorID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf := parseCert(t, issued.CertificatePEM)
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key}, leaf
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// sign is a sensor's ECDSA P-256 proof of possession of msg.
func sign(t *testing.T, cert tls.Certificate, msg []byte) []byte {
	t.Helper()
	h := sha256.Sum256(msg)
	sig, err := cert.PrivateKey.(crypto.Signer).Sign(rand.Reader, h[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// A CA rotation with an overlap, on a running server (no reload call, no
// restart): after Rotate, a sensor holding an old-CA certificate and only
// the old CA still connects and proves possession (it can renew), new
// certificates come from the new CA, sensors get both CA certificates;
// FinishRotation moves the server certificate to the new CA, and from then
// on old-CA certificates are refused while renewed sensors connect.
func TestCARotationWithOverlap(t *testing.T) {
	ca, dir := newCA(t, nil)
	addr := tlsServer(t, ca.ServerTLSConfig())
	oldBundle := ca.CACertificatePEM()
	oldCA := ca.Certificate()
	oldCert, oldLeaf := sensorTLSCert(t, ca)
	if _, err := dial(addr, oldBundle, oldCert); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	serverBefore := readCert(t, filepath.Join(dir, x509ca.ServerCertFile))

	res, err := x509ca.Rotate(dir, x509ca.RotateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mode(t, filepath.Join(dir, x509ca.PreviousCAKeyFile)) != 0o600 || mode(t, filepath.Join(dir, x509ca.CAKeyFile)) != 0o600 {
		t.Fatal("CA keys are not 0600 after the rotation")
	}
	if !res.PreviousCANotAfter.Equal(oldCA.NotAfter.UTC()) {
		t.Errorf("previous CA not after %v, want %v", res.PreviousCANotAfter, oldCA.NotAfter)
	}
	if _, err := x509ca.Rotate(dir, x509ca.RotateOptions{}); !errors.Is(err, x509ca.ErrRotationInProgress) {
		t.Fatalf("a second Rotate during the overlap: %v", err)
	}

	// The overlap.
	newCA := ca.Certificate()
	if newCA.Equal(oldCA) {
		t.Fatal("the running CA did not take the new CA")
	}
	bundle := ca.CACertificatePEM()
	if n := bytes.Count(bundle, []byte("-----BEGIN CERTIFICATE-----")); n != 2 {
		t.Fatalf("sensors are sent %d CA certificates during the overlap, want 2", n)
	}
	seen, err := dial(addr, oldBundle, oldCert)
	if err != nil {
		t.Fatalf("during the overlap, a sensor with an old-CA certificate and the old CA: %v", err)
	}
	if !seen.Equal(serverBefore) {
		t.Fatal("the server certificate changed at Rotate: sensors trusting only the old CA could not connect")
	}
	msg := []byte("renew")
	sig := sign(t, oldCert, msg)
	if id, err := ca.VerifyPossession(pemOf(oldLeaf), msg, sig, time.Now()); err != nil || id.SensorID != "s1" {
		t.Fatalf("during the overlap, proof with an old-CA certificate: %v %+v", err, id)
	}
	newCert, newLeaf := sensorTLSCert(t, ca)
	if newLeaf.CheckSignatureFrom(newCA) != nil {
		t.Fatal("a certificate issued during the overlap is not the new CA's")
	}
	if _, err := dial(addr, bundle, newCert); err != nil {
		t.Fatalf("during the overlap, a renewed sensor: %v", err)
	}

	// Finish.
	fin, err := x509ca.FinishRotation(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !fin.ServerReissued {
		t.Fatal("FinishRotation kept the old CA's server certificate")
	}
	if _, err := x509ca.FinishRotation(dir, 0); !errors.Is(err, x509ca.ErrNoRotation) {
		t.Fatalf("FinishRotation twice: %v", err)
	}
	for _, f := range []string{x509ca.PreviousCACertFile, x509ca.PreviousCAKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s remains after FinishRotation: %v", f, err)
		}
	}
	server := readCert(t, filepath.Join(dir, x509ca.ServerCertFile))
	if server.CheckSignatureFrom(newCA) != nil || server.Subject.CommonName != serverBefore.Subject.CommonName ||
		!slices.Equal(server.DNSNames, serverBefore.DNSNames) || len(server.IPAddresses) != len(serverBefore.IPAddresses) {
		t.Fatal("the new server certificate is not the new CA's for the same names")
	}
	if n := bytes.Count(ca.CACertificatePEM(), []byte("-----BEGIN CERTIFICATE-----")); n != 1 {
		t.Fatalf("sensors are sent %d CA certificates after the rotation, want 1", n)
	}
	seen, err = dial(addr, bundle, newCert)
	if err != nil {
		t.Fatalf("after the rotation, a renewed sensor: %v", err)
	}
	if !seen.Equal(server) {
		t.Fatal("the running server did not take the new server certificate")
	}
	if _, err := dial(addr, bundle, oldCert); err == nil {
		t.Fatal("after the rotation, a sensor with an old-CA certificate connected")
	}
	if _, err := dial(addr, oldBundle, oldCert); err == nil {
		t.Fatal("after the rotation, a sensor that never renewed connected")
	}
	if _, err := ca.VerifyPossession(pemOf(oldLeaf), msg, sig, time.Now()); err == nil {
		t.Fatal("after the rotation, a proof with an old-CA certificate verified")
	}
	if _, err := x509ca.Load(x509ca.Config{Dir: dir}); err != nil {
		t.Fatalf("a control plane started after the rotation: %v", err)
	}
}

// The gRPC server certificate is replaced on a running server: the next
// handshake presents the new one. Files that do not load together (a key
// that is not the certificate's) leave the last good ones in use.
func TestServerCertificateReloads(t *testing.T) {
	ca, dir := newCA(t, nil)
	addr := tlsServer(t, ca.ServerTLSConfig())
	cert, _ := sensorTLSCert(t, ca)
	before, err := dial(addr, ca.CACertificatePEM(), cert)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, x509ca.ServerKeyFile)
	goodKey, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	opts := testInit
	opts.ReplaceServerCert = true
	if _, err := x509ca.Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	after, err := dial(addr, ca.CACertificatePEM(), cert)
	if err != nil {
		t.Fatal(err)
	}
	if after.Equal(before) {
		t.Fatal("the running server still presents the replaced certificate")
	}
	// A mismatched key: the last good pair stays in use.
	newKey, _ := os.ReadFile(keyPath)
	if err := os.WriteFile(keyPath, goodKey, 0o600); err != nil {
		t.Fatal(err)
	}
	seen, err := dial(addr, ca.CACertificatePEM(), cert)
	if err != nil || !seen.Equal(after) {
		t.Fatalf("with a mismatched key: %v; want the last good certificate", err)
	}
	if err := os.WriteFile(keyPath, newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if seen, err := dial(addr, ca.CACertificatePEM(), cert); err != nil || !seen.Equal(after) {
		t.Fatalf("after the key was put back: %v", err)
	}
}

// The price of following the files: what each TLS handshake and each
// issuance pays to learn that nothing changed (five stat calls).
func BenchmarkCurrentUnchanged(b *testing.B) {
	ca, _ := newCA(b, nil)
	get := ca.ServerTLSConfig().GetConfigForClient
	b.ReportAllocs()
	for b.Loop() {
		if _, err := get(nil); err != nil {
			b.Fatal(err)
		}
	}
}
