package app_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

// renewalStart starts a provisioner (its sensor JWTs expiring after ttl
// unless ttl is zero) and a control plane that renews a certificate of any
// age, logs in and provisions tenant acme. It returns the plane, an
// enroller aimed at it and a context that ends after three minutes.
func renewalStart(t *testing.T, ttl time.Duration) (*plane, *sensorclient.Enroller, context.Context) {
	t.Helper()
	prov := provisionertest.Start(t, provisionertest.Options{})
	if ttl != 0 {
		setSensorJWTTTL(prov, ttl)
	}
	p := startPlane(t, prov, func(c *app.ServeConfig) { c.RenewMinInterval = time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p.login()
	p.provisionedTenant("acme", "Acme")
	return p, p.enroller(), ctx
}

// enrolClient enrols a sensor of tenant through the reference client.
func (p *plane) enrolClient(ctx context.Context, e *sensorclient.Enroller, tenant string) *sensorclient.State {
	p.t.Helper()
	var code struct{ Code string }
	p.must("POST", "/api/tenants/"+tenant+"/claim-codes", map[string]any{"ttlSeconds": 600, "sensorName": "edge"}, "", 201, &code)
	r, err := e.Redeem(ctx, code.Code, "edge.local")
	if err != nil {
		p.t.Fatal(err)
	}
	st, err := e.Enroll(ctx, r)
	if err != nil {
		p.t.Fatal(err)
	}
	return st
}

// check calls the gRPC health check as st, on a new connection.
func check(ctx context.Context, st *sensorclient.State) error {
	cert, err := st.TLSCertificate()
	if err != nil {
		return err
	}
	g, err := sensorclient.NewGRPC(sensorclient.GRPCConfig{Address: st.GRPCAddress, CAPEM: st.CAPEM, Certificate: cert, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer g.Close()
	_, err = g.Check(ctx, sensorpb.SensorState_SENSOR_STATE_RUNNING, "test")
	return err
}

func caCerts(t *testing.T, pemBytes []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := pemBytes; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// Rotating the sensor CA on a running control plane (no restart): during
// the overlap a sensor holding an old-CA certificate still connects and
// renews onto the new CA, receiving both CA certificates; after
// rotate-ca --finish the renewed sensor connects to the server certificate
// of the new CA, while one that never renewed is refused, on gRPC and on
// renewal.
func TestSensorCARotation(t *testing.T) {
	p, e, ctx := renewalStart(t, 0)
	renewing := p.enrolClient(ctx, e, "acme")
	stale := p.enrolClient(ctx, e, "acme")
	oldCA := caCerts(t, renewing.CAPEM)
	if len(oldCA) != 1 {
		t.Fatalf("enrolment sent %d CA certificates, want 1", len(oldCA))
	}
	if err := check(ctx, renewing); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	t.Setenv("CA_DIR", p.Config.CADir)

	code, out, errs := runCLI("", "rotate-ca")
	if code != 0 {
		t.Fatalf("rotate-ca: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "rotate-ca --finish") {
		t.Errorf("rotate-ca does not say how to finish:\n%s", out)
	}
	if code, _, errs := runCLI("", "rotate-ca"); code != 1 || !strings.Contains(errs, "in progress") {
		t.Fatalf("rotate-ca during the overlap: exit %d, %q", code, errs)
	}

	// The overlap: both old-CA sensors still connect.
	for name, st := range map[string]*sensorclient.State{"renewing": renewing, "stale": stale} {
		if err := check(ctx, st); err != nil {
			t.Fatalf("during the overlap, %s sensor with an old-CA certificate: %v", name, err)
		}
	}
	renewed, err := e.Renew(ctx, renewing)
	if err != nil {
		t.Fatalf("during the overlap, renewal with an old-CA certificate: %v", err)
	}
	bundle := caCerts(t, renewed.CAPEM)
	if len(bundle) != 2 || !bundle[1].Equal(oldCA[0]) || bundle[0].Equal(oldCA[0]) {
		t.Fatalf("renewal sent %d CA certificates, want the new CA then the old one", len(bundle))
	}
	leaf, err := renewed.Leaf()
	if err != nil {
		t.Fatal(err)
	}
	if leaf.CheckSignatureFrom(bundle[0]) != nil {
		t.Fatal("the renewed certificate is not the new CA's")
	}
	if err := check(ctx, renewed); err != nil {
		t.Fatalf("during the overlap, renewed sensor: %v", err)
	}
	fresh := p.enrolClient(ctx, e, "acme")
	if len(caCerts(t, fresh.CAPEM)) != 2 {
		t.Fatal("an enrolment during the overlap did not send both CA certificates")
	}

	// Finish: the server certificate moves to the new CA, the old CA goes.
	code, out, errs = runCLI("", "rotate-ca", "--finish")
	if code != 0 || !strings.Contains(out, "issued by the new CA") {
		t.Fatalf("rotate-ca --finish: exit %d: %s%s", code, out, errs)
	}
	for name, st := range map[string]*sensorclient.State{"renewed": renewed, "enrolled during the overlap": fresh} {
		if err := check(ctx, st); err != nil {
			t.Fatalf("after the rotation, %s sensor: %v", name, err)
		}
	}
	if err := check(ctx, stale); err == nil {
		t.Fatal("after the rotation, a sensor that never renewed still connects")
	}
	if _, err := e.Renew(ctx, stale); err == nil {
		t.Fatal("after the rotation, a sensor with an old-CA certificate renewed")
	}
	again, err := e.Renew(ctx, renewed)
	if err != nil {
		t.Fatalf("after the rotation, renewal of a renewed sensor: %v", err)
	}
	if n := len(caCerts(t, again.CAPEM)); n != 1 {
		t.Fatalf("after the rotation, renewal sent %d CA certificates, want 1", n)
	}
	if cur, _ := os.ReadFile(p.Config.CADir + "/ca.crt"); !bytes.Equal(bytes.TrimSpace(cur), bytes.TrimSpace(again.CAPEM)) {
		t.Fatal("after the rotation, sensors are sent another CA than the one in CA_DIR")
	}
}
