package natsjwt

import (
	"errors"
	"fmt"
	"net/url"
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
// system account. accountServerURL may be empty; nats-server only uses it
// (with "/accounts" appended) when its config has no resolver, which the
// fragment of RenderServerConfig always has.
func SignOperator(seed []byte, name, systemAccount, accountServerURL string) (string, error) {
	kp, pub, err := keyFromSeed(seed, nkeys.PrefixByteOperator)
	if err != nil {
		return "", fmt.Errorf("natsjwt: operator seed: %w", err)
	}
	if !IsAccountKey(systemAccount) {
		return "", fmt.Errorf("natsjwt: system account %q: %w", systemAccount, provisioning.ErrInvalidPublicKey)
	}
	oc := jwt.NewOperatorClaims(pub)
	oc.Name = name
	oc.SystemAccount = systemAccount
	oc.AccountServerURL = accountServerURL
	if err := validate(oc); err != nil {
		return "", fmt.Errorf("natsjwt: operator: %w", err)
	}
	tok, err := oc.Encode(kp)
	if err != nil {
		return "", fmt.Errorf("natsjwt: sign operator: %w", err)
	}
	return tok, nil
}

// PublicKeyFromSeed returns the public key of any nkey seed.
func PublicKeyFromSeed(seed []byte) (string, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return "", fmt.Errorf("natsjwt: %w: does not decode", ErrInvalidSeed)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("natsjwt: %w: no public key", ErrInvalidSeed)
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
