package jwtauthority

import (
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/core/provisioning"
)

// Authority is the provisioning.OperatorAuthority init-operator creates the
// operator with: nkeys for the keys, this package's Signer for the SYS and
// CONTROL accounts.
type Authority struct {
	// Stream is the command stream's name (see Config.Stream).
	Stream string
	// ControlJetStream are the CONTROL account's JetStream limits.
	ControlJetStream Limits
}

// NewOperatorKey implements provisioning.OperatorAuthority.
func (Authority) NewOperatorKey() (string, []byte, error) { return NewOperatorKey() }

// NewSigningKey implements provisioning.OperatorAuthority.
func (Authority) NewSigningKey() (string, []byte, error) { return NewSigningKey() }

// PublicKeyFromSeed implements provisioning.OperatorAuthority.
func (Authority) PublicKeyFromSeed(seed []byte) (string, error) { return PublicKeyFromSeed(seed) }

// HoldsKey implements provisioning.OperatorAuthority with HoldsKey.
func (Authority) HoldsKey(op provisioning.Operator, pub string) error { return HoldsKey(op, pub) }

// AccountSigner implements provisioning.OperatorAuthority.
func (a Authority) AccountSigner(signingSeed []byte, controlAccount string) (provisioning.Signer, error) {
	s, err := New(Config{OperatorSeed: signingSeed, Stream: a.Stream, ControlJetStream: a.ControlJetStream})
	if err != nil {
		return nil, err
	}
	if controlAccount == "" {
		return s, nil
	}
	return s.WithControlAccount(controlAccount)
}

// SignOperator implements provisioning.OperatorAuthority.
func (Authority) SignOperator(identitySeed []byte, spec provisioning.OperatorJWT) (string, error) {
	return SignOperatorSpec(identitySeed, OperatorSpec{
		Name: spec.Name, SystemAccount: spec.SystemAccount, AccountServerURL: spec.ResolverURL, SigningKeys: spec.SigningKeys,
	})
}

// ReadOperator implements provisioning.OperatorAuthority with ParseOperator.
func (Authority) ReadOperator(operatorJWT string) (string, provisioning.OperatorJWT, error) {
	pub, spec, err := ParseOperator(operatorJWT)
	if err != nil {
		return "", provisioning.OperatorJWT{}, err
	}
	return pub, provisioning.OperatorJWT{
		Name: spec.Name, SystemAccount: spec.SystemAccount, ResolverURL: spec.AccountServerURL, SigningKeys: spec.SigningKeys,
	}, nil
}

// AccountIssuer implements provisioning.OperatorAuthority: the issuer of a
// decoded account JWT.
func (Authority) AccountIssuer(accountJWT string) (string, error) {
	c, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: account JWT: %w", err)
	}
	return c.Issuer, nil
}

// CheckResolverURL implements provisioning.OperatorAuthority with
// ValidateResolverURL.
func (Authority) CheckResolverURL(url string) error { return ValidateResolverURL(url) }

// ServerConfig implements provisioning.OperatorAuthority with
// RenderServerConfig.
func (Authority) ServerConfig(op provisioning.Operator, resolverURL string) []byte {
	return RenderServerConfig(op.JWT, op.SystemAccount, resolverURL)
}

// HoldsKey tells whether pub may sign op's accounts: op's identity key or
// a signing key its JWT lists.
func HoldsKey(op provisioning.Operator, pub string) error {
	if pub == op.PubKey {
		return nil
	}
	idPub, spec, err := ParseOperator(op.JWT)
	if err != nil {
		return fmt.Errorf("the store's operator JWT: %w", err)
	}
	if idPub != op.PubKey {
		return fmt.Errorf("the store's operator JWT is of %s, not %s", idPub, op.PubKey)
	}
	if spec.Trusts(idPub, pub) {
		return nil
	}
	keys := "none"
	if len(spec.SigningKeys) > 0 {
		keys = strings.Join(spec.SigningKeys, ", ")
	}
	return fmt.Errorf("it holds key %s but the store's operator is %s, with signing keys: %s", pub, op.PubKey, keys)
}
