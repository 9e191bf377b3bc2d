package app_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
)

// Attack: an account JWT signed by a key the operator does not list — a
// fresh operator-type key, another operator's signing key, or one whose
// issuer claim names the operator's signing key while another key signed
// it — is put where the resolver reads (the database) for a tenant's
// account. The resolver answers what the database holds, so the boundary
// is nats-server: it must refuse the tenant's sensors while such a JWT is
// served, and take them again once the genuine JWT is back (positive
// control, each time). The removed-key case is TestOperatorSigningKeyRotation.
func TestAttackAccountJWTNotSignedByTheOperator(t *testing.T) {
	s, pool := signingKeyStack(t)
	_, spec, err := jwtauthority.ParseOperator(s.Operator.JWT)
	if err != nil || len(spec.SigningKeys) != 1 {
		t.Fatalf("operator signing keys %v, %v", spec.SigningKeys, err)
	}
	listed := spec.SigningKeys[0]

	account(t, s, "acme")
	u := sensorUser(t, s, "acme", "s1")
	genuine := resolverJWT(t, s, u.AccountID)
	claims, err := jwt.DecodeAccountClaims(genuine)
	if err != nil {
		t.Fatal(err)
	}
	if claims.Issuer != listed {
		t.Fatalf("genuine account JWT issued by %s, want the signing key %s", claims.Issuer, listed)
	}

	sign := func(kp nkeys.KeyPair) string {
		t.Helper()
		c := *claims
		tok, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	unlisted, _ := nkeys.CreateOperator()
	_, otherSeed, _ := jwtauthority.NewSigningKey() // another operator's signing key
	otherKP, err := nkeys.FromSeed(otherSeed)
	if err != nil {
		t.Fatal(err)
	}
	// Issuer claim rewritten to the listed key, signature left the attacker's.
	forgedIssuer := func() string {
		parts := strings.Split(sign(unlisted), ".")
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		m["iss"] = listed
		payload, _ = json.Marshal(m)
		parts[1] = base64.RawURLEncoding.EncodeToString(payload)
		return strings.Join(parts, ".")
	}()

	serve := func(tok string) {
		t.Helper()
		serveAccountJWT(t, s, pool, u.AccountID, tok)
	}
	for name, tok := range map[string]string{
		"a key the operator does not list":                         sign(unlisted),
		"another operator's signing key":                           sign(otherKP),
		"an issuer claim naming the listed key, signed by another": forgedIssuer,
	} {
		t.Run(name, func(t *testing.T) {
			serve(tok)
			if _, err := connectSensor(t, s, u); err == nil {
				t.Fatal("BROKEN: nats-server took a sensor of an account whose JWT the operator's keys did not sign")
			}
			serve(genuine)
			sensorConnects(t, s, u, "positive control: the genuine account JWT back")
		})
	}
}
