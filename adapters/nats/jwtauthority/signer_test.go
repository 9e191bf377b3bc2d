package jwtauthority_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

type keys struct {
	opPub   string
	opSeed  []byte
	sysPub  string
	sysSeed []byte
	ctlPub  string
	ctlSeed []byte
}

func newKeys(t *testing.T) keys {
	t.Helper()
	var k keys
	var err error
	if k.opPub, k.opSeed, err = jwtauthority.NewOperatorKey(); err != nil {
		t.Fatal(err)
	}
	k.sysPub, k.sysSeed = accountKey(t)
	k.ctlPub, k.ctlSeed = accountKey(t)
	return k
}

// newKey is a new key pair made by create (nkeys.CreateAccount, …): its
// public key and seed.
func newKey(t *testing.T, create func() (nkeys.KeyPair, error)) (pub string, seed []byte) {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ = kp.PublicKey()
	seed, _ = kp.Seed()
	return pub, seed
}

func accountKey(t *testing.T) (string, []byte) { t.Helper(); return newKey(t, nkeys.CreateAccount) }

func userKey(t *testing.T) string {
	t.Helper()
	pub, _ := newKey(t, nkeys.CreateUser)
	return pub
}

var unlimited = jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}

func newSigner(t *testing.T, k keys) *jwtauthority.Signer {
	t.Helper()
	s, err := jwtauthority.New(jwtauthority.Config{
		OperatorSeed: k.opSeed, Stream: "RXC_CMD", ControlAccount: k.ctlPub,
		ControlJetStream: jwtauthority.Limits{DiskStorage: 1 << 30, MemoryStorage: 1 << 20, Streams: 4, Consumers: 10000},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// newKeysAndSigner is newKeys and a signer of those keys (newSigner): the
// set-up most tests share.
func newKeysAndSigner(t *testing.T) (keys, *jwtauthority.Signer) {
	t.Helper()
	k := newKeys(t)
	return k, newSigner(t, k)
}

// signed is s.SignAccount(spec), which must succeed.
func signed(t *testing.T, s *jwtauthority.Signer, spec provisioning.AccountSpec) string {
	t.Helper()
	tok, err := s.SignAccount(spec)
	if err != nil {
		t.Fatalf("SignAccount: %v", err)
	}
	return tok
}

// accountView is what the tests assert of a decoded account JWT.
type accountView struct {
	Subject     string
	Issuer      string
	Name        string
	JetStream   jwt.JetStreamLimits
	Exports     jwt.Exports
	Imports     jwt.Imports
	Revocations jwt.RevocationList
}

func view(t *testing.T, tok string) accountView {
	t.Helper()
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatalf("decode account JWT: %v", err)
	}
	vr := jwt.CreateValidationResults()
	ac.Validate(vr)
	if !vr.IsEmpty() {
		t.Errorf("signed account JWT has validation issues: %v", vr.Errors())
	}
	return accountView{
		Subject: ac.Subject, Issuer: ac.Issuer, Name: ac.Name,
		JetStream: ac.Limits.JetStreamLimits, Exports: ac.Exports, Imports: ac.Imports, Revocations: ac.Revocations,
	}
}

// bySubject ignores order: encoding sorts exports and imports by subject.
var bySubject = []cmp.Option{
	cmpopts.SortSlices(func(a, b *jwt.Export) bool { return a.Subject < b.Subject }),
	cmpopts.SortSlices(func(a, b *jwt.Import) bool { return a.Subject < b.Subject }),
}

func TestSignAccount(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	tenantPub, _ := accountKey(t)
	u1, u2 := userKey(t), userKey(t)
	t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	controlExports := jwt.Exports{
		{Name: "cmd-pull", Subject: "$JS.API.CONSUMER.MSG.NEXT.RXC_CMD.*", Type: jwt.Service, ResponseType: jwt.ResponseTypeStream},
		{Name: "cmd-info", Subject: "$JS.API.CONSUMER.INFO.RXC_CMD.*", Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton},
		{Name: "cmd-ack", Subject: "$JS.ACK.RXC_CMD.*.*.*.*.*.*", Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton},
		{Name: "cmd-ack-v2", Subject: "$JS.ACK.*.*.RXC_CMD.*.*.*.*.*.*", Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton},
		{Name: "status", Subject: "rxc.*.*.status", Type: jwt.Service, ResponseType: jwt.ResponseTypeSingleton},
	}
	tenantImports := jwt.Imports{
		{Name: "cmd-pull", Subject: "$JS.API.CONSUMER.MSG.NEXT.RXC_CMD.*", LocalSubject: "ctrl.API.CONSUMER.MSG.NEXT.RXC_CMD.*", Account: k.ctlPub, Type: jwt.Service},
		{Name: "cmd-info", Subject: "$JS.API.CONSUMER.INFO.RXC_CMD.*", LocalSubject: "ctrl.API.CONSUMER.INFO.RXC_CMD.*", Account: k.ctlPub, Type: jwt.Service},
		{Name: "cmd-ack", Subject: "$JS.ACK.RXC_CMD.*.*.*.*.*.*", Account: k.ctlPub, Type: jwt.Service},
		{Name: "cmd-ack-v2", Subject: "$JS.ACK.*.*.RXC_CMD.*.*.*.*.*.*", Account: k.ctlPub, Type: jwt.Service},
		{Name: "status", Subject: "rxc.acme.*.status", Account: k.ctlPub, Type: jwt.Service},
	}
	tests := []struct {
		name string
		spec provisioning.AccountSpec
		want accountView
	}{
		{
			name: "system account has a name only",
			spec: provisioning.AccountSpec{PubKey: k.sysPub, Name: "SYS", Kind: provisioning.KindSystem},
			want: accountView{Subject: k.sysPub, Issuer: k.opPub, Name: "SYS"},
		},
		{
			name: "control account has JetStream and the public exports",
			spec: provisioning.AccountSpec{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl},
			want: accountView{
				Subject: k.ctlPub, Issuer: k.opPub, Name: "CONTROL",
				JetStream: jwt.JetStreamLimits{DiskStorage: 1 << 30, MemoryStorage: 1 << 20, Streams: 4, Consumer: 10000},
				Exports:   controlExports,
			},
		},
		{
			name: "control account carries revocations of backend users",
			spec: provisioning.AccountSpec{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl,
				Revocations: []provisioning.Revocation{{AccountPubKey: k.ctlPub, UserPubKey: u1, RevokedAt: t1}}},
			want: accountView{
				Subject: k.ctlPub, Issuer: k.opPub, Name: "CONTROL",
				JetStream:   jwt.JetStreamLimits{DiskStorage: 1 << 30, MemoryStorage: 1 << 20, Streams: 4, Consumer: 10000},
				Exports:     controlExports,
				Revocations: jwt.RevocationList{u1: t1.Add(jwtauthority.RevocationMargin).Unix()},
			},
		},
		{
			name: "tenant account imports from CONTROL without JetStream",
			spec: provisioning.AccountSpec{PubKey: tenantPub, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme"},
			want: accountView{Subject: tenantPub, Issuer: k.opPub, Name: "acme", Imports: tenantImports},
		},
		{
			name: "tenant account revokes each user at its time",
			spec: provisioning.AccountSpec{PubKey: tenantPub, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme",
				Revocations: []provisioning.Revocation{
					{AccountPubKey: tenantPub, UserPubKey: u1, RevokedAt: t1},
					{AccountPubKey: tenantPub, UserPubKey: u2, RevokedAt: t2},
				}},
			want: accountView{Subject: tenantPub, Issuer: k.opPub, Name: "acme", Imports: tenantImports,
				Revocations: jwt.RevocationList{u1: t1.Add(jwtauthority.RevocationMargin).Unix(), u2: t2.Add(jwtauthority.RevocationMargin).Unix()}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := signed(t, s, tc.spec)
			if diff := cmp.Diff(tc.want, view(t, tok), bySubject...); diff != "" {
				t.Errorf("account JWT mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The exports and imports the signer writes are exactly topology's, so the
// permissions sensors get and the subjects the accounts expose cannot drift.
func TestSignAccountFollowsTopology(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	ctl := signed(t, s, provisioning.AccountSpec{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl})
	var gotExports []string
	for _, e := range view(t, ctl).Exports {
		gotExports = append(gotExports, string(e.Subject))
	}
	var wantExports []string
	for _, e := range topology.ControlExports("RXC_CMD") {
		wantExports = append(wantExports, e.Subject)
	}
	if diff := cmp.Diff(wantExports, gotExports, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("exports differ from topology (-want +got):\n%s", diff)
	}
}

func TestSignAccountRefuses(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	noControl, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: k.opSeed, Stream: "RXC_CMD", ControlJetStream: unlimited})
	if err != nil {
		t.Fatal(err)
	}
	tenantPub, _ := accountKey(t)
	otherPub, _ := accountKey(t)
	u := userKey(t)
	now := time.Now()
	tests := []struct {
		name   string
		signer *jwtauthority.Signer
		spec   provisioning.AccountSpec
		want   error
	}{
		{"user key as account", s, provisioning.AccountSpec{PubKey: u, Kind: provisioning.KindSystem}, provisioning.ErrInvalidPublicKey},
		{"garbage account key", s, provisioning.AccountSpec{PubKey: "Anope", Kind: provisioning.KindSystem}, provisioning.ErrInvalidPublicKey},
		{"unknown kind", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: "other"}, jwtauthority.ErrInvalidClaims},
		{"tenant without control account", noControl, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant, TenantID: "acme"}, jwtauthority.ErrNoControlAccount},
		{"tenant id not subject safe", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant, TenantID: "a.b"}, ids.ErrInvalidID},
		{"empty tenant id", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant}, ids.ErrInvalidID},
		{"revocation of another account", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant, TenantID: "acme",
			Revocations: []provisioning.Revocation{{AccountPubKey: otherPub, UserPubKey: u, RevokedAt: now}}}, jwtauthority.ErrInvalidClaims},
		{"revoked key is not a user", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant, TenantID: "acme",
			Revocations: []provisioning.Revocation{{AccountPubKey: tenantPub, UserPubKey: otherPub, RevokedAt: now}}}, provisioning.ErrInvalidPublicKey},
		{"revocation without time", s, provisioning.AccountSpec{PubKey: tenantPub, Kind: provisioning.KindTenant, TenantID: "acme",
			Revocations: []provisioning.Revocation{{AccountPubKey: tenantPub, UserPubKey: u}}}, jwtauthority.ErrInvalidClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.signer.SignAccount(tc.spec)
			if !errors.Is(err, tc.want) {
				t.Fatalf("SignAccount error = %v, want %v", err, tc.want)
			}
			if tok != "" {
				t.Errorf("SignAccount returned a JWT with an error")
			}
		})
	}
}

func TestWithControlAccount(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	base, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: k.opSeed, Stream: "RXC_CMD", ControlJetStream: unlimited})
	if err != nil {
		t.Fatal(err)
	}
	tenantPub, _ := accountKey(t)
	spec := provisioning.AccountSpec{PubKey: tenantPub, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme"}
	withCtl, err := base.WithControlAccount(k.ctlPub)
	if err != nil {
		t.Fatalf("WithControlAccount: %v", err)
	}
	tok := signed(t, withCtl, spec)
	for _, im := range view(t, tok).Imports {
		if im.Account != k.ctlPub {
			t.Errorf("import %q from %s, want %s", im.Name, im.Account, k.ctlPub)
		}
	}
	if _, err := base.SignAccount(spec); !errors.Is(err, jwtauthority.ErrNoControlAccount) {
		t.Errorf("original signer changed: SignAccount error = %v, want %v", err, jwtauthority.ErrNoControlAccount)
	}
	if _, err := base.WithControlAccount(userKey(t)); !errors.Is(err, provisioning.ErrInvalidPublicKey) {
		t.Errorf("WithControlAccount(user key) error = %v, want %v", err, provisioning.ErrInvalidPublicKey)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	good := jwtauthority.Config{OperatorSeed: k.opSeed, Stream: "RXC_CMD", ControlAccount: k.ctlPub, ControlJetStream: unlimited}
	tests := []struct {
		name   string
		modify func(*jwtauthority.Config)
		want   error
	}{
		{"account seed as operator", func(c *jwtauthority.Config) { c.OperatorSeed = k.ctlSeed }, jwtauthority.ErrInvalidSeed},
		{"garbage seed", func(c *jwtauthority.Config) { c.OperatorSeed = []byte("SOnotaseed") }, jwtauthority.ErrInvalidSeed},
		{"no seed", func(c *jwtauthority.Config) { c.OperatorSeed = nil }, jwtauthority.ErrInvalidSeed},
		{"stream with a dot", func(c *jwtauthority.Config) { c.Stream = "RXC.CMD" }, jwtauthority.ErrInvalidConfig},
		{"control is an operator key", func(c *jwtauthority.Config) { c.ControlAccount = k.opPub }, provisioning.ErrInvalidPublicKey},
		{"JetStream disabled", func(c *jwtauthority.Config) { c.ControlJetStream = jwtauthority.Limits{} }, jwtauthority.ErrInvalidConfig},
		{"limit below -1", func(c *jwtauthority.Config) { c.ControlJetStream.Streams = -2 }, jwtauthority.ErrInvalidConfig},
		{"no consumers", func(c *jwtauthority.Config) { c.ControlJetStream.Consumers = 0 }, jwtauthority.ErrInvalidConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.modify(&cfg)
			if _, err := jwtauthority.New(cfg); !errors.Is(err, tc.want) {
				t.Fatalf("New error = %v, want %v", err, tc.want)
			}
		})
	}
	s, err := jwtauthority.New(good)
	if err != nil {
		t.Fatalf("New(good config): %v", err)
	}
	if got := s.OperatorPublicKey(); got != k.opPub {
		t.Errorf("OperatorPublicKey = %s, want %s", got, k.opPub)
	}
}

type userView struct {
	Issuer        string
	IssuerAccount string
	Name          string
	Expires       int64
	Pub           jwt.Permission
	Sub           jwt.Permission
	Tags          jwt.TagList
	BearerToken   bool
}

func decodeUser(t *testing.T, tok string) (*jwt.UserClaims, userView) {
	t.Helper()
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatalf("decode user JWT: %v", err)
	}
	return uc, userView{Issuer: uc.Issuer, IssuerAccount: uc.IssuerAccount, Name: uc.Name, Expires: uc.Expires,
		Pub: uc.Pub, Sub: uc.Sub, Tags: uc.Tags, BearerToken: uc.BearerToken}
}

func TestMintUser(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	tenantPub, tenantSeed := accountKey(t)
	sensor := topology.Sensor{Stream: "RXC_CMD", TenantID: "acme", SensorID: "s-1"}
	tests := []struct {
		name string
		spec provisioning.UserSpec
		want userView
	}{
		{
			name: "sensor user",
			spec: provisioning.UserSpec{AccountPubKey: tenantPub, AccountSeed: tenantSeed, Name: "s-1",
				Permissions: sensor.Permissions(), Tags: []string{"rxc-tenant:acme", "rxc-sensor:s-1"}},
			want: userView{Issuer: tenantPub, Name: "s-1",
				Pub: jwt.Permission{Allow: jwt.StringList{
					"rxc.acme.s-1.status",
					"ctrl.API.CONSUMER.MSG.NEXT.RXC_CMD.cmd-acme-s-1",
					"ctrl.API.CONSUMER.INFO.RXC_CMD.cmd-acme-s-1",
					"$JS.ACK.RXC_CMD.cmd-acme-s-1.*.*.*.*.*",
					"$JS.ACK.*.*.RXC_CMD.cmd-acme-s-1.*.*.*.*.*",
				}},
				Sub:  jwt.Permission{Allow: jwt.StringList{"_INBOX_acme_s-1.>"}},
				Tags: jwt.TagList{"rxc-tenant:acme", "rxc-sensor:s-1"},
			},
		},
		{
			name: "backend user",
			spec: provisioning.UserSpec{AccountPubKey: k.ctlPub, AccountSeed: k.ctlSeed, Name: "backend", Permissions: topology.BackendPermissions()},
			want: userView{Issuer: k.ctlPub, Name: "backend",
				Pub: jwt.Permission{Allow: jwt.StringList{
					"rxc.*.*.cmd", "rxc.*.*.events",
					"$JS.API.CONSUMER.MSG.NEXT.RXC_EVENTS.event-writer", "$JS.API.CONSUMER.INFO.RXC_EVENTS.event-writer",
					"$JS.ACK.RXC_EVENTS.event-writer.*.*.*.*.*", "$JS.ACK.*.*.RXC_EVENTS.event-writer.*.*.*.*.*",
				}},
				Sub: jwt.Permission{Allow: jwt.StringList{"rxc.*.*.status", "_INBOX.>"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := s.MintUser(tc.spec)
			if err != nil {
				t.Fatalf("MintUser: %v", err)
			}
			uc, got := decodeUser(t, m.JWT)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user JWT mismatch (-want +got):\n%s", diff)
			}
			if uc.Subject != m.PubKey {
				t.Errorf("JWT subject %s, returned key %s", uc.Subject, m.PubKey)
			}
			seedPub, err := jwtauthority.PublicKeyFromSeed(m.Seed)
			if err != nil || seedPub != m.PubKey || !jwtauthority.IsUserKey(seedPub) {
				t.Errorf("seed belongs to %q (err %v), want user key %s", seedPub, err, m.PubKey)
			}
			creds, err := s.Creds(m.JWT, m.Seed)
			if err != nil {
				t.Fatalf("Creds: %v", err)
			}
			if want, err := jwt.FormatUserConfig(m.JWT, m.Seed); err != nil || !bytes.Equal(creds, want) {
				t.Errorf("creds differ from jwt.FormatUserConfig's (err %v):\n%s\nwant\n%s", err, creds, want)
			}
			if !bytes.Equal(m.Creds, creds) {
				t.Errorf("the minted user's creds differ from Creds':\n%s\nwant\n%s", m.Creds, creds)
			}
			gotJWT, err := jwt.ParseDecoratedJWT(creds)
			if err != nil || gotJWT != m.JWT {
				t.Errorf("creds JWT = %q (err %v), want the minted JWT", gotJWT, err)
			}
			kp, err := jwt.ParseDecoratedUserNKey(creds)
			if err != nil {
				t.Fatalf("creds seed: %v", err)
			}
			if pub, _ := kp.PublicKey(); pub != m.PubKey {
				t.Errorf("creds seed belongs to %s, want %s", pub, m.PubKey)
			}
		})
	}
}

func TestMintUserRefuses(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	perms := topology.BackendPermissions()
	tests := []struct {
		name string
		spec provisioning.UserSpec
		want error
	}{
		{"operator seed as account", provisioning.UserSpec{AccountSeed: k.opSeed, Name: "x", Permissions: perms}, jwtauthority.ErrInvalidSeed},
		{"seed of another account", provisioning.UserSpec{AccountPubKey: k.sysPub, AccountSeed: k.ctlSeed, Name: "x", Permissions: perms}, jwtauthority.ErrInvalidSeed},
		{"no seed", provisioning.UserSpec{AccountPubKey: k.ctlPub, Name: "x", Permissions: perms}, jwtauthority.ErrInvalidSeed},
		{"no publish list allows everything", provisioning.UserSpec{AccountSeed: k.ctlSeed, Name: "x",
			Permissions: topology.Permissions{Subscribe: []string{"_INBOX.>"}}}, jwtauthority.ErrInvalidClaims},
		{"no subscribe list allows everything", provisioning.UserSpec{AccountSeed: k.ctlSeed, Name: "x",
			Permissions: topology.Permissions{Publish: []string{"a"}}}, jwtauthority.ErrInvalidClaims},
		{"invalid subject", provisioning.UserSpec{AccountSeed: k.ctlSeed, Name: "x",
			Permissions: topology.Permissions{Publish: []string{"a b"}, Subscribe: []string{"_INBOX.>"}}}, jwtauthority.ErrInvalidClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.MintUser(tc.spec); !errors.Is(err, tc.want) {
				t.Fatalf("MintUser error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCredsRefuses(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	acct := signed(t, s, provisioning.AccountSpec{PubKey: k.sysPub, Name: "SYS", Kind: provisioning.KindSystem})
	perms := topology.BackendPermissions()
	a, err := s.MintUser(provisioning.UserSpec{AccountSeed: k.ctlSeed, Name: "a", Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.MintUser(provisioning.UserSpec{AccountSeed: k.ctlSeed, Name: "b", Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		jwt  string
		seed []byte
	}{
		{"account JWT", acct, k.sysSeed},
		{"seed of another user", a.JWT, b.Seed},
		{"account seed", a.JWT, k.ctlSeed},
		{"not a JWT", "garbage", a.Seed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if creds, err := s.Creds(tc.jwt, tc.seed); err == nil {
				t.Fatalf("Creds formatted %d bytes, want an error", len(creds))
			}
		})
	}
}

func TestEphemeralUsers(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	tests := []struct {
		name string
		mint func([]byte) (string, []byte, error)
		seed []byte
		want userView
	}{
		{"system user", jwtauthority.SystemUser, k.sysSeed, userView{Issuer: k.sysPub, Name: "rxc-provisioner-sys",
			Pub: jwt.Permission{Allow: jwt.StringList{"$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"}},
			Sub: jwt.Permission{Allow: jwt.StringList{"_INBOX.>"}}}},
		{"control admin", jwtauthority.ControlAdminUser, k.ctlSeed, userView{Issuer: k.ctlPub, Name: "rxc-control-admin",
			Pub: jwt.Permission{Allow: jwt.StringList{"$JS.API.>"}},
			Sub: jwt.Permission{Allow: jwt.StringList{"_INBOX.>"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, seed, err := tc.mint(tc.seed)
			if err != nil {
				t.Fatalf("mint: %v", err)
			}
			uc, got := decodeUser(t, tok)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user JWT mismatch (-want +got):\n%s", diff)
			}
			if pub, err := jwtauthority.PublicKeyFromSeed(seed); err != nil || pub != uc.Subject {
				t.Errorf("seed belongs to %q (err %v), want %s", pub, err, uc.Subject)
			}
			if _, _, err := tc.mint(k.opSeed); !errors.Is(err, jwtauthority.ErrInvalidSeed) {
				t.Errorf("mint with operator seed: error = %v, want %v", err, jwtauthority.ErrInvalidSeed)
			}
		})
	}
}

func TestSignOperator(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	tok, err := jwtauthority.SignOperator(k.opSeed, "rxc", k.sysPub, "http://127.0.0.1:8080/jwt/v1")
	if err != nil {
		t.Fatalf("SignOperator: %v", err)
	}
	oc, err := jwt.DecodeOperatorClaims(tok)
	if err != nil {
		t.Fatalf("decode operator: %v", err)
	}
	type opView struct{ Subject, Issuer, Name, SystemAccount, AccountServerURL string }
	want := opView{Subject: k.opPub, Issuer: k.opPub, Name: "rxc", SystemAccount: k.sysPub, AccountServerURL: "http://127.0.0.1:8080/jwt/v1"}
	got := opView{oc.Subject, oc.Issuer, oc.Name, oc.SystemAccount, oc.AccountServerURL}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operator JWT mismatch (-want +got):\n%s", diff)
	}

	tests := []struct {
		name      string
		seed      []byte
		sys, aurl string
		want      error
	}{
		{"account seed", k.sysSeed, k.sysPub, "", jwtauthority.ErrInvalidSeed},
		{"system account is a user", k.opSeed, userKey(t), "", provisioning.ErrInvalidPublicKey},
		{"account server url without scheme", k.opSeed, k.sysPub, "127.0.0.1:8080", jwtauthority.ErrInvalidClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := jwtauthority.SignOperator(tc.seed, "rxc", tc.sys, tc.aurl); !errors.Is(err, tc.want) {
				t.Fatalf("SignOperator error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestKeyKinds(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	u := userKey(t)
	// Replace the last character with another one (the same one would leave
	// the key intact, one run in 32).
	last := "A"
	if strings.HasSuffix(k.ctlPub, last) {
		last = "B"
	}
	tests := []struct {
		name              string
		key               string
		isAccount, isUser bool
	}{
		{"account", k.ctlPub, true, false},
		{"user", u, false, true},
		{"operator", k.opPub, false, false},
		{"seed", string(k.ctlSeed), false, false},
		{"corrupted account", k.ctlPub[:len(k.ctlPub)-1] + last, false, false},
		{"empty", "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := jwtauthority.IsAccountKey(tc.key); got != tc.isAccount {
				t.Errorf("IsAccountKey = %v, want %v", got, tc.isAccount)
			}
			if got := jwtauthority.IsUserKey(tc.key); got != tc.isUser {
				t.Errorf("IsUserKey = %v, want %v", got, tc.isUser)
			}
		})
	}
	if _, err := jwtauthority.PublicKeyFromSeed([]byte("not a seed")); !errors.Is(err, jwtauthority.ErrInvalidSeed) {
		t.Errorf("PublicKeyFromSeed(garbage) error = %v, want %v", err, jwtauthority.ErrInvalidSeed)
	}
	if got, err := jwtauthority.PublicKeyFromSeed(k.opSeed); err != nil || got != k.opPub {
		t.Errorf("PublicKeyFromSeed(operator) = %q, %v; want %s", got, err, k.opPub)
	}
}

func TestErrorsNeverCarrySeeds(t *testing.T) {
	t.Parallel()
	k := newKeys(t)
	_, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: k.ctlSeed, Stream: "RXC_CMD", ControlJetStream: unlimited})
	if err == nil || strings.Contains(err.Error(), string(k.ctlSeed)) {
		t.Fatalf("New with account seed: error %v must exist and not contain the seed", err)
	}
	s := newSigner(t, k)
	_, err = s.MintUser(provisioning.UserSpec{AccountPubKey: k.sysPub, AccountSeed: k.ctlSeed, Name: "x", Permissions: topology.BackendPermissions()})
	if err == nil || strings.Contains(err.Error(), string(k.ctlSeed)) {
		t.Fatalf("MintUser with wrong seed: error %v must exist and not contain the seed", err)
	}
}

func TestHasPermissions(t *testing.T) {
	t.Parallel()
	_, s := newKeysAndSigner(t)
	perms := topology.Sensor{Stream: "RXC_CMD", TenantID: "acme", SensorID: "s1"}.Permissions()
	tenantPub, tenantSeed := accountKey(t)
	m, err := s.MintUser(provisioning.UserSpec{AccountPubKey: tenantPub, AccountSeed: tenantSeed, Name: "s1", Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	reordered := topology.Permissions{Publish: append([]string{perms.Publish[4]}, perms.Publish[:4]...), Subscribe: perms.Subscribe}
	tests := []struct {
		name string
		p    topology.Permissions
		want bool
	}{
		{"same", perms, true},
		{"same, other order", reordered, true},
		{"one publish fewer", topology.Permissions{Publish: perms.Publish[1:], Subscribe: perms.Subscribe}, false},
		{"another sensor", topology.Sensor{Stream: "RXC_CMD", TenantID: "acme", SensorID: "s2"}.Permissions(), false},
		{"extra subscribe", topology.Permissions{Publish: perms.Publish, Subscribe: append(slices.Clone(perms.Subscribe), "x.>")}, false},
		{"answering requests", topology.Permissions{Publish: perms.Publish, Subscribe: perms.Subscribe, Responses: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.HasPermissions(m.JWT, tt.p)
			if err != nil || got != tt.want {
				t.Fatalf("HasPermissions = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := s.HasPermissions("not a jwt", perms); err == nil {
		t.Fatal("garbage decoded")
	}
}

// The backend user answers status reports: its JWT allows one response a
// request within topology.ResponseWindow, and a backend JWT from before
// (no responses) is outdated.
func TestBackendUserAnswersRequests(t *testing.T) {
	t.Parallel()
	_, s := newKeysAndSigner(t)
	acctPub, acctSeed := accountKey(t)
	backend := topology.BackendPermissions()
	m, err := s.MintUser(provisioning.UserSpec{AccountPubKey: acctPub, AccountSeed: acctSeed, Name: "backend", Permissions: backend})
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(m.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Resp == nil || uc.Resp.MaxMsgs != 1 || uc.Resp.Expires != topology.ResponseWindow {
		t.Fatalf("backend response permission %+v, want one message within %s", uc.Resp, topology.ResponseWindow)
	}
	if ok, err := s.HasPermissions(m.JWT, backend); err != nil || !ok {
		t.Fatalf("HasPermissions(backend) = %v, %v", ok, err)
	}
	old := backend
	old.Responses = false
	if ok, _ := s.HasPermissions(m.JWT, old); ok {
		t.Fatal("a JWT that answers requests matches permissions that do not")
	}
	prev, err := s.MintUser(provisioning.UserSpec{AccountPubKey: acctPub, AccountSeed: acctSeed, Name: "backend", Permissions: old})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.HasPermissions(prev.JWT, backend); ok {
		t.Fatal("a backend JWT without responses counts as current")
	}
}

func TestAccountMatches(t *testing.T) {
	t.Parallel()
	k, s := newKeysAndSigner(t)
	tenantPub, _ := accountKey(t)
	revoked := provisioning.Revocation{AccountPubKey: k.ctlPub, UserPubKey: userKey(t), RevokedAt: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
	control := provisioning.AccountSpec{PubKey: k.ctlPub, Name: "CONTROL", Kind: provisioning.KindControl, Revocations: []provisioning.Revocation{revoked}}
	tenant := provisioning.AccountSpec{PubKey: tenantPub, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme"}
	other := func(mut func(*jwtauthority.Config)) *jwtauthority.Signer {
		t.Helper()
		cfg := jwtauthority.Config{
			OperatorSeed: k.opSeed, Stream: "RXC_CMD", ControlAccount: k.ctlPub,
			ControlJetStream: jwtauthority.Limits{DiskStorage: 1 << 30, MemoryStorage: 1 << 20, Streams: 4, Consumers: 10000},
		}
		mut(&cfg)
		o, err := jwtauthority.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	otherOp := newKeys(t)
	noRevocation := control
	noRevocation.Revocations = nil
	laterRevocation := control
	laterRevocation.Revocations = []provisioning.Revocation{{AccountPubKey: k.ctlPub, UserPubKey: revoked.UserPubKey, RevokedAt: revoked.RevokedAt.Add(time.Hour)}}
	renamed := tenant
	renamed.Name = "globex"
	renamed.TenantID = "globex"

	tests := []struct {
		name string
		jwt  string
		spec provisioning.AccountSpec
		want bool
	}{
		{"control, signed now", signed(t, s, control), control, true},
		{"tenant, signed now", signed(t, s, tenant), tenant, true},
		{"control limits changed since", signed(t, other(func(c *jwtauthority.Config) { c.ControlJetStream.DiskStorage = 1 << 31 }), control), control, false},
		{"command stream renamed since (exports)", signed(t, other(func(c *jwtauthority.Config) { c.Stream = "OLD_CMD" }), control), control, false},
		{"command stream renamed since (imports)", signed(t, other(func(c *jwtauthority.Config) { c.Stream = "OLD_CMD" }), tenant), tenant, false},
		{"a revocation missing", signed(t, s, noRevocation), control, false},
		{"a revocation at another time", signed(t, s, laterRevocation), control, false},
		{"another tenant's claims", signed(t, s, renamed), tenant, false},
		{"signed by another operator", signed(t, other(func(c *jwtauthority.Config) { c.OperatorSeed = otherOp.opSeed }), control), control, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.AccountMatches(tt.jwt, tt.spec)
			if err != nil || got != tt.want {
				t.Fatalf("AccountMatches = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	// Signed twice a second apart, the same claims still match.
	first := signed(t, s, control)
	time.Sleep(1100 * time.Millisecond)
	if ok, err := s.AccountMatches(first, control); err != nil || !ok {
		t.Fatalf("AccountMatches of a JWT signed a second earlier = %v, %v; want true", ok, err)
	}
	if ok, err := s.AccountMatches("not a jwt", control); ok || err != nil {
		t.Fatalf("AccountMatches of garbage = %v, %v; want false so a re-sign repairs it", ok, err)
	}
	tampered := signed(t, s, control)
	if strings.HasSuffix(tampered, "AAAA") {
		tampered = tampered[:len(tampered)-4] + "BBBB"
	} else {
		tampered = tampered[:len(tampered)-4] + "AAAA"
	}
	if ok, err := s.AccountMatches(tampered, control); ok || err != nil {
		t.Fatalf("AccountMatches of a JWT with a broken signature = %v, %v; want false", ok, err)
	}

	revs, err := s.AccountRevocations(signed(t, s, control))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(control.Revocations, revs); diff != "" {
		t.Errorf("AccountRevocations (-want +got):\n%s", diff)
	}
	if revs, err := s.AccountRevocations(signed(t, s, tenant)); err != nil || len(revs) != 0 {
		t.Errorf("AccountRevocations of an account without any = %v, %v", revs, err)
	}
	if _, err := s.AccountRevocations("not a jwt"); err == nil {
		t.Fatal("AccountRevocations decoded garbage")
	}
	if _, err := s.AccountMatches(signed(t, s, control), provisioning.AccountSpec{PubKey: "nope", Kind: provisioning.KindControl}); err == nil {
		t.Fatal("an invalid spec was compared")
	}
}

// An operator JWT lists its signing keys and ParseOperator reads them back,
// verified; the identity key as its own signing key, a non-operator key, and
// a JWT not self-signed are refused.
func TestOperatorSigningKeys(t *testing.T) {
	idPub, idSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	sk, _, err := jwtauthority.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sysPub, _ := accountKey(t)
	tok, err := jwtauthority.SignOperatorSpec(idSeed, jwtauthority.OperatorSpec{Name: "OP", SystemAccount: sysPub, AccountServerURL: "http://p:8080/jwt/v1/accounts/", SigningKeys: []string{sk}})
	if err != nil {
		t.Fatal(err)
	}
	pub, spec, err := jwtauthority.ParseOperator(tok)
	if err != nil {
		t.Fatal(err)
	}
	if pub != idPub || spec.SystemAccount != sysPub || len(spec.SigningKeys) != 1 || spec.SigningKeys[0] != sk || spec.AccountServerURL != "http://p:8080/jwt/v1/accounts/" {
		t.Fatalf("parsed %s %+v", pub, spec)
	}
	if !spec.Trusts(pub, sk) || !spec.Trusts(pub, idPub) || spec.Trusts(pub, sysPub) {
		t.Fatal("Trusts does not name exactly the identity and signing keys")
	}
	for name, keys := range map[string][]string{"identity as signing key": {idPub}, "account key": {sysPub}, "garbage": {"Oxyz"}} {
		if _, err := jwtauthority.SignOperatorSpec(idSeed, jwtauthority.OperatorSpec{Name: "OP", SystemAccount: sysPub, SigningKeys: keys}); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
	// A JWT signed by a signing key for the identity is not self-signed.
	_, skSeed, _ := jwtauthority.NewSigningKey()
	kp, _ := nkeys.FromSeed(skSeed)
	oc := jwt.NewOperatorClaims(idPub)
	forged, err := oc.Encode(kp)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := jwtauthority.ParseOperator(forged); !errors.Is(err, jwtauthority.ErrInvalidOperator) {
		t.Fatalf("operator JWT signed by another key: %v", err)
	}
	if _, _, err := jwtauthority.ParseOperator(tok[:len(tok)-3] + "abc"); !errors.Is(err, jwtauthority.ErrInvalidOperator) {
		t.Fatalf("tampered operator JWT: %v", err)
	}
}

// The tenant-wide entry is signed as nats-server's "*" at its own time,
// without the margin single-user entries carry (it would refuse every new
// user for that long), and reads back unchanged.
func TestAllUsersRevocationCarriesNoMargin(t *testing.T) {
	_, s := newKeysAndSigner(t)
	acct, _ := accountKey(t)
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	one := userKey(t)
	spec := provisioning.AccountSpec{PubKey: acct, Name: "acme", Kind: provisioning.KindTenant, TenantID: "acme", Revocations: []provisioning.Revocation{
		{AccountPubKey: acct, UserPubKey: provisioning.AllUsers, RevokedAt: at},
		{AccountPubKey: acct, UserPubKey: one, RevokedAt: at.Add(time.Minute)},
	}}
	tok := signed(t, s, spec)
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got := ac.Revocations[jwt.All]; got != at.Unix() {
		t.Errorf("* entry at %d, want %d (no margin)", got, at.Unix())
	}
	if got := ac.Revocations[one]; got != at.Add(time.Minute+jwtauthority.RevocationMargin).Unix() {
		t.Errorf("single-user entry at %d, want the time plus the margin", got)
	}
	// A JWT issued at the entry's second is refused, one a second later is not.
	if !ac.Revocations.IsRevoked(userKey(t), at) || ac.Revocations.IsRevoked(userKey(t), at.Add(time.Second)) {
		t.Error("the * entry does not refuse exactly the JWTs issued at or before it")
	}
	back, err := s.AccountRevocations(tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range back {
		want := spec.Revocations[1].RevokedAt
		if r.UserPubKey == provisioning.AllUsers {
			want = at
		}
		if !r.RevokedAt.Equal(want) {
			t.Errorf("read back %s at %s, want %s", r.UserPubKey, r.RevokedAt, want)
		}
	}
	if ok, err := s.AccountMatches(tok, spec); err != nil || !ok {
		t.Errorf("AccountMatches = %v, %v; want the JWT to match its spec", ok, err)
	}
}
