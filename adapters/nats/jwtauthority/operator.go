package jwtauthority

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/provisioning"
)

// ErrInvalidResolverURL is wrapped by ValidateResolverURL.
var ErrInvalidResolverURL = errors.New("invalid resolver url")

// NewOperatorKey creates a fresh operator key pair.
func NewOperatorKey() (pub string, seed []byte, err error) {
	return newKey(nkeys.CreateOperator)
}

// SignOperator signs the self-signed operator JWT naming systemAccount as the
// system account, with no signing keys: the identity key signs the
// accounts. accountServerURL may be empty; nats-server only uses it (with
// "/accounts" appended) when its config has no resolver, which the fragment
// of RenderServerConfig always has.
func SignOperator(seed []byte, name, systemAccount, accountServerURL string) (string, error) {
	return SignOperatorSpec(seed, OperatorSpec{Name: name, SystemAccount: systemAccount, AccountServerURL: accountServerURL})
}

// OperatorSpec is what an operator JWT says.
type OperatorSpec struct {
	Name             string
	SystemAccount    string
	AccountServerURL string
	// SigningKeys are operator keys ("O…") that may sign accounts in the
	// identity key's place; nats-server trusts accounts signed by any of
	// them.
	SigningKeys []string
}

// SignOperatorSpec signs the self-signed operator JWT spec describes with
// the identity seed.
func SignOperatorSpec(seed []byte, spec OperatorSpec) (string, error) {
	kp, pub, err := keyFromSeed(seed, nkeys.PrefixByteOperator)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: operator seed: %w", err)
	}
	if !IsAccountKey(spec.SystemAccount) {
		return "", fmt.Errorf("jwtauthority: system account %q: %w", spec.SystemAccount, provisioning.ErrInvalidPublicKey)
	}
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = spec.Name
	oc.SystemAccount = spec.SystemAccount
	oc.AccountServerURL = spec.AccountServerURL
	for _, k := range spec.SigningKeys {
		if !nkeys.IsValidPublicOperatorKey(k) {
			return "", fmt.Errorf("jwtauthority: signing key %q: %w", k, provisioning.ErrInvalidPublicKey)
		}
		if k == pub {
			return "", fmt.Errorf("jwtauthority: %w: the identity key cannot be its own signing key", ErrInvalidClaims)
		}
		oc.SigningKeys.Add(k)
	}
	if err := validate(oc); err != nil {
		return "", fmt.Errorf("jwtauthority: operator: %w", err)
	}
	tok, err := oc.Encode(kp)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: sign operator: %w", err)
	}
	return tok, nil
}

// ErrInvalidOperator is wrapped by ParseOperator.
var ErrInvalidOperator = errors.New("invalid operator JWT")

// ParseOperator decodes an operator JWT, checks that it is self-signed by
// the identity key it names, and returns what it says with that key.
func ParseOperator(operatorJWT string) (pub string, spec OperatorSpec, err error) {
	oc, err := jwt.DecodeOperatorClaims(operatorJWT)
	if err != nil {
		return "", OperatorSpec{}, fmt.Errorf("jwtauthority: %w: %v", ErrInvalidOperator, err)
	}
	if oc.Issuer != oc.Subject || !nkeys.IsValidPublicOperatorKey(oc.Subject) {
		return "", OperatorSpec{}, fmt.Errorf("jwtauthority: %w: not self-signed by an operator key", ErrInvalidOperator)
	}
	spec = OperatorSpec{Name: oc.Name, SystemAccount: oc.SystemAccount, AccountServerURL: oc.AccountServerURL}
	spec.SigningKeys = append(spec.SigningKeys, oc.SigningKeys...)
	slices.Sort(spec.SigningKeys)
	return oc.Subject, spec, nil
}

// Trusts reports whether key may sign accounts of the operator spec
// describes: it is the identity key pub or one of the signing keys.
func (spec OperatorSpec) Trusts(pub, key string) bool {
	return key == pub || slices.Contains(spec.SigningKeys, key)
}

// NewSigningKey creates a fresh operator signing key pair.
func NewSigningKey() (pub string, seed []byte, err error) {
	return newKey(nkeys.CreateOperator)
}

// PublicKeyFromSeed returns the public key of any nkey seed.
func PublicKeyFromSeed(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", fmt.Errorf("jwtauthority: %w: does not decode", ErrInvalidSeed)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("jwtauthority: %w: no public key", ErrInvalidSeed)
	}
	return pub, nil
}

// IsAccountKey reports whether s is a valid account public key ("A…").
func IsAccountKey(s string) bool { return nkeys.IsValidPublicAccountKey(s) }

// IsUserKey reports whether s is a valid user public key ("U…").
func IsUserKey(s string) bool { return nkeys.IsValidPublicUserKey(s) }

// ValidateResolverURL checks a URL resolver base before it goes into the
// server config: absolute http(s) with a host, ending in "/" (the server
// appends the account key directly), no query or fragment, and nothing the
// server's resolver parser would misread (whitespace, quotes, or "mem",
// which nats-server takes for the memory resolver wherever it appears).
func ValidateResolverURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidResolverURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme must be http or https", ErrInvalidResolverURL)
	case u.Host == "":
		return fmt.Errorf("%w: no host", ErrInvalidResolverURL)
	case !strings.HasSuffix(u.Path, "/"):
		return fmt.Errorf("%w: path must end with /", ErrInvalidResolverURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%w: no query, fragment or user info allowed", ErrInvalidResolverURL)
	case strings.ContainsAny(s, " \t\r\n\"'()\\"):
		return fmt.Errorf("%w: whitespace, quotes, parentheses and backslashes are not allowed", ErrInvalidResolverURL)
	case strings.Contains(strings.ToLower(s), "mem"):
		return fmt.Errorf("%w: nats-server reads a resolver containing \"mem\" as the memory resolver", ErrInvalidResolverURL)
	}
	return nil
}

// RenderServerConfig renders the nats-server configuration fragment that
// trusts the operator: the operator JWT inline, the system account and the URL
// resolver, and nothing else (resolver_preload is rejected with a URL
// resolver). Callers check resolverURL with ValidateResolverURL; characters
// that would break out of the fragment are percent-encoded regardless.
func RenderServerConfig(operatorJWT, systemAccount, resolverURL string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "operator: %q\n", confSafe(operatorJWT))
	fmt.Fprintf(&b, "system_account: %q\n", confSafe(systemAccount))
	fmt.Fprintf(&b, "resolver: URL(%q)\n", confSafe(resolverURL))
	return []byte(b.String())
}

// confSafe percent-encodes every byte that is not printable ASCII or that
// could end a quoted value, so no input can add a line to the config.
func confSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '\'' || c == '(' || c == ')' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
