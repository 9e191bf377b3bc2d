// Package oidcsignin is the relying party of OpenID Connect single sign-on
// for operators: the authorization code flow with PKCE (S256), state and
// nonce, the provider's discovery document and its JWKS (fetched again when
// a token names a key it does not know, so key rotation needs no restart),
// and ID token validation (signature, issuer, audience, expiry, nonce) by
// github.com/coreos/go-oidc. It turns a validated ID token into an
// operators.Identity; the core decides what the person may do.
package oidcsignin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/rxc-project/rxc/core/operators"
)

// DefaultScopes are requested when Config.Scopes is empty.
var DefaultScopes = []string{oidc.ScopeOpenID, "email", "profile"}

// ErrUnavailable: the provider's discovery document could not be read.
var ErrUnavailable = errors.New("the identity provider is unreachable")

// Config configures a Provider.
type Config struct {
	IssuerURL, ClientID, ClientSecret, RedirectURL string
	Scopes                                         []string // default openid email profile
	GroupsClaim                                    string   // default "groups"
	// Timeout bounds each call to the provider (default 10 s).
	Timeout time.Duration
	// Clock is the verifier's time (tests); default time.Now.
	Clock func() time.Time
}

// Provider is one OpenID provider. Discovery happens at the first use and
// is retried on the next one after a failure, so the control plane starts
// while the provider is down.
type Provider struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
}

// New checks cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.IssuerURL == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("oidcsignin: issuer URL, client id and redirect URL are required")
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultScopes
	}
	hasOpenID := false
	for _, s := range cfg.Scopes {
		hasOpenID = hasOpenID || s == oidc.ScopeOpenID
	}
	if !hasOpenID {
		return nil, errors.New("oidcsignin: the scopes must include openid")
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Provider{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout}}, nil
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, p.client), p.client)
}

// discover reads the discovery document once.
func (p *Provider) discover(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return nil
	}
	// The key set outlives this request: it fetches keys with the
	// context given here, so it gets one without the request's deadline.
	prov, err := oidc.NewProvider(p.ctx(context.WithoutCancel(ctx)), p.cfg.IssuerURL)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	p.provider = prov
	p.verifier = prov.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: p.cfg.Clock})
	p.oauth = oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, RedirectURL: p.cfg.RedirectURL,
		Endpoint: prov.Endpoint(), Scopes: p.cfg.Scopes,
	}
	return nil
}

// Attempt is what a sign-in must remember between the redirect to the
// provider and the callback (the caller keeps it in a short-lived cookie).
type Attempt struct {
	State, Nonce, Verifier string
}

// Begin starts a sign-in: fresh state, nonce and PKCE verifier, and the
// provider's authorization URL to send the browser to.
func (p *Provider) Begin(ctx context.Context) (Attempt, string, error) {
	if err := p.discover(ctx); err != nil {
		return Attempt{}, "", err
	}
	a := Attempt{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier()}
	u := p.oauth.AuthCodeURL(a.State, oidc.Nonce(a.Nonce), oauth2.S256ChallengeOption(a.Verifier))
	return a, u, nil
}

// Finish exchanges the code (with the PKCE verifier) and validates the ID
// token: signature against the provider's keys, issuer, audience (this
// client), expiry and the attempt's nonce. Every refusal wraps
// operators.ErrFederationRefused.
func (p *Provider) Finish(ctx context.Context, a Attempt, code string) (operators.Identity, error) {
	if err := p.discover(ctx); err != nil {
		return operators.Identity{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	tok, err := p.oauth.Exchange(p.ctx(ctx), code, oauth2.VerifierOption(a.Verifier))
	if err != nil {
		return operators.Identity{}, fmt.Errorf("%w: code exchange: %v", operators.ErrFederationRefused, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return operators.Identity{}, fmt.Errorf("%w: the token response has no ID token", operators.ErrFederationRefused)
	}
	idt, err := p.verifier.Verify(p.ctx(ctx), raw)
	if err != nil {
		return operators.Identity{}, fmt.Errorf("%w: ID token: %v", operators.ErrFederationRefused, err)
	}
	if a.Nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(a.Nonce)) != 1 {
		return operators.Identity{}, fmt.Errorf("%w: ID token: wrong nonce", operators.ErrFederationRefused)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return operators.Identity{}, fmt.Errorf("%w: ID token claims: %v", operators.ErrFederationRefused, err)
	}
	email, _ := claims["email"].(string)
	return operators.Identity{
		Issuer: idt.Issuer, Subject: idt.Subject, Email: email, EmailVerified: emailVerified(claims),
		Groups: stringsOf(claims[p.cfg.GroupsClaim]),
	}, nil
}

// emailVerified reads the email_verified claim: absent, the address
// counts as verified; a boolean, or the string "true" or "false" (some
// providers send a string), says so; anything else is not a verification.
func emailVerified(claims map[string]any) bool {
	v, ok := claims["email_verified"]
	if !ok {
		return true
	}
	switch t := v.(type) {
	case bool:
		return t
	case string:
		return strings.EqualFold(strings.TrimSpace(t), "true")
	}
	return false
}

// stringsOf reads a claim that is a list of strings, or one string.
func stringsOf(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func random() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// EncodeAttempt and DecodeAttempt are the cookie form of an Attempt.
func EncodeAttempt(a Attempt) string {
	return a.State + "." + a.Nonce + "." + a.Verifier
}

// DecodeAttempt reads EncodeAttempt's form.
func DecodeAttempt(s string) (Attempt, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || len(s) > 512 {
		return Attempt{}, false
	}
	return Attempt{State: parts[0], Nonce: parts[1], Verifier: parts[2]}, true
}
