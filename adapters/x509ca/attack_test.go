package x509ca_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/x509ca"
)

// resumingClient dials addr as a sensor with cert, sharing one TLS session
// cache across calls, and trusting any server certificate: an attacker
// does not need the server to be trusted, only to be let in. It reports
// whether the server sent "ok" and whether the session was resumed.
type resumingClient struct {
	cache tls.ClientSessionCache
	cert  tls.Certificate
}

func (c *resumingClient) dial(addr string) (resumed bool, err error) {
	state, err := exchange(addr, &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{c.cert}, ServerName: "localhost",
		InsecureSkipVerify: true, // the attacker trusts whatever server answers
		ClientSessionCache: c.cache,
	})
	return state.DidResume, err
}

// Attack: a sensor holding an old-CA certificate keeps a TLS 1.3 session
// ticket from before rotate-ca --finish and resumes that session after it,
// hoping the server skips the client-certificate check on resumption (the
// gRPC interceptor would let it in: its serial is still the sensor's active
// one, as it never renewed). Positive control: the same client does resume
// while its CA is trusted, so a refusal afterwards is the finish, not a
// client that never resumes.
func TestAttackOldCASessionResumptionAfterFinish(t *testing.T) {
	ca, dir := newCA(t, nil)
	addr := tlsServer(t, ca.ServerTLSConfig())
	oldCert, _ := sensorTLSCert(t, ca)
	c := &resumingClient{cache: tls.NewLRUClientSessionCache(8), cert: oldCert}

	if _, err := c.dial(addr); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if _, err := x509ca.Rotate(dir, x509ca.RotateOptions{}); err != nil {
		t.Fatal(err)
	}
	resumed, err := c.dial(addr)
	if err != nil {
		t.Fatalf("during the overlap: %v", err)
	}
	if !resumed {
		t.Fatal("positive control: the client did not resume its session while its CA was trusted; the attack below proves nothing")
	}
	if _, err := x509ca.FinishRotation(dir, 0); err != nil {
		t.Fatal(err)
	}
	resumed, err = c.dial(addr)
	if err == nil {
		t.Fatalf("BROKEN: after rotate-ca --finish an old-CA certificate got in (resumed session: %v)", resumed)
	}
	// And without a ticket, the plain handshake is refused too.
	fresh := &resumingClient{cert: oldCert}
	if _, err := fresh.dial(addr); err == nil {
		t.Fatal("BROKEN: after rotate-ca --finish an old-CA certificate completed a full handshake")
	}
}

// Attack: an impostor CA with the real CA's subject, subject key id and
// organisation issues a certificate with the sensor's exact CN and URI SAN.
// It must be refused by mutual TLS and by renewal's proof of possession,
// during a rotation as well as outside one. Positive control: the real
// CA's certificate for the same sensor passes both.
func TestAttackImpostorCACertificateWithTheSensorsName(t *testing.T) {
	t.Parallel()
	ca, dir := newCA(t, nil)
	addr := tlsServer(t, ca.ServerTLSConfig())
	realCert, realLeaf := sensorTLSCert(t, ca)
	msg := []byte("rxc-renew-v1\ns1\n...")

	impostor := func() (tls.Certificate, *x509.Certificate) {
		genuine := ca.Certificate()
		caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		caTmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: genuine.Subject, SubjectKeyId: genuine.SubjectKeyId,
			NotBefore: genuine.NotBefore, NotAfter: genuine.NotAfter, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		caDER := must(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey))
		fakeCA := must(x509.ParseCertificate(caDER))
		leafKey := p256()
		tmpl := &x509.Certificate{
			SerialNumber: realLeaf.SerialNumber, // even the serial the control plane has on record
			Subject:      realLeaf.Subject, URIs: realLeaf.URIs,
			NotBefore: realLeaf.NotBefore, NotAfter: realLeaf.NotAfter,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true, AuthorityKeyId: genuine.SubjectKeyId,
		}
		der := must(x509.CreateCertificate(rand.Reader, tmpl, fakeCA, leafKey.Public(), caKey))
		leaf := must(x509.ParseCertificate(der))
		// The chain is sent too, as an intermediate would be.
		return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: leafKey}, leaf
	}
	check := func(phase string) {
		t.Helper()
		// Positive control first: the genuine certificate passes.
		if _, err := (&resumingClient{cert: realCert}).dial(addr); err != nil {
			t.Fatalf("%s, positive control: the genuine certificate was refused: %v", phase, err)
		}
		if id, err := ca.VerifyPossession(pemOf(realLeaf), msg, sign(t, realCert, msg), time.Now()); err != nil || id.SensorID != "s1" {
			t.Fatalf("%s, positive control: genuine proof refused: %v", phase, err)
		}
		fake, fakeLeaf := impostor()
		if _, err := (&resumingClient{cert: fake}).dial(addr); err == nil {
			t.Errorf("BROKEN (%s): mutual TLS accepted an impostor CA's certificate with the sensor's name", phase)
		}
		if _, err := ca.VerifyPossession(pemOf(fakeLeaf), msg, sign(t, fake, msg), time.Now()); err == nil {
			t.Errorf("BROKEN (%s): a proof by an impostor CA's certificate verified", phase)
		}
	}
	check("before any rotation")
	if _, err := x509ca.Rotate(dir, x509ca.RotateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("during the overlap")
}

// Attack: the control plane's own server certificate (issued by the sensor
// CA, for serverAuth) presented as a client certificate. Whoever reads the
// server key must not become a sensor; and no certificate without the
// clientAuth usage may pass.
func TestAttackServerCertificateAsClientCertificate(t *testing.T) {
	t.Parallel()
	ca, dir := newCA(t, nil)
	addr := tlsServer(t, ca.ServerTLSConfig())
	server, err := tls.LoadX509KeyPair(dir+"/"+x509ca.ServerCertFile, dir+"/"+x509ca.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	realCert, _ := sensorTLSCert(t, ca)
	if _, err := (&resumingClient{cert: realCert}).dial(addr); err != nil {
		t.Fatalf("positive control: a sensor certificate was refused: %v", err)
	}
	if _, err := (&resumingClient{cert: server}).dial(addr); err == nil {
		t.Fatal("BROKEN: the server certificate was accepted as a sensor's client certificate")
	}
}
