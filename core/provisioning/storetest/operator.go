package storetest

// The operator record: init-operator's one-time insert and the signing-key
// rotation's compare-and-swap of its JWT (provisioning.OperatorRecords,
// provisioning.SigningKeyRecords).

import (
	"errors"
	"testing"

	"github.com/rxc-project/rxc/core/provisioning"
)

func testOperatorMissing(t *testing.T, s Store) {
	_, err := s.Operator(ctx(t))
	wantErr(t, "Operator on an empty store", err, provisioning.ErrNoOperator)
	wantErr(t, "Operator on an empty store", err, provisioning.ErrNotFound)
}

func testInitOperator(t *testing.T, s Store) {
	f := initOperator(t, s)
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatalf("Operator: %v", err)
	}
	diff(t, "Operator", f.op, got)
	for _, want := range []provisioning.Account{f.sys, f.control} {
		got, err := s.Account(ctx(t), want.PubKey)
		if err != nil {
			t.Fatalf("Account(%s): %v", want.Name, err)
		}
		diff(t, "Account("+want.Name+")", want, got)
	}
	if _, err := s.TenantAccount(ctx(t), "SYS"); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("TenantAccount(SYS) error = %v, want ErrNotFound: system accounts are not tenants", err)
	}
}

func testInitOperatorTwice(t *testing.T, s Store) {
	first := initOperator(t, s)
	second := newOperator()
	err := s.InitOperator(ctx(t), second.op, second.sys, second.control)
	wantErr(t, "second InitOperator", err, provisioning.ErrOperatorExists)
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Operator after a refused second init", first.op, got)
	if _, err := s.Account(ctx(t), second.sys.PubKey); !errors.Is(err, provisioning.ErrNotFound) {
		t.Errorf("refused init stored its SYS account: Account error = %v, want ErrNotFound", err)
	}
}

// testReplaceOperatorJWT: the JWT is replaced only while it is the one the
// caller read, and only for the stored operator.
func testReplaceOperatorJWT(t *testing.T, s Store) {
	f := initOperator(t, s)
	old := f.op.JWT
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, "not.the.stored.jwt", "eyJ.stale.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("ReplaceOperatorJWT from a stale JWT: %v, want ErrOperatorChanged", err)
	}
	if err := s.ReplaceOperatorJWT(ctx(t), key("O"), old, "eyJ.other.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("ReplaceOperatorJWT of another operator key: %v, want ErrOperatorChanged", err)
	}
	if got, err := s.Operator(ctx(t)); err != nil || got.JWT != old {
		t.Fatalf("after refused replacements the operator JWT is %q (%v), want the original", got.JWT, err)
	}
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, old, "eyJ.new.x"); err != nil {
		t.Fatalf("ReplaceOperatorJWT: %v", err)
	}
	want := f.op
	want.JWT = "eyJ.new.x"
	got, err := s.Operator(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Operator after ReplaceOperatorJWT", want, got)
	if err := s.ReplaceOperatorJWT(ctx(t), f.op.PubKey, old, "eyJ.again.x"); !errors.Is(err, provisioning.ErrOperatorChanged) {
		t.Errorf("second ReplaceOperatorJWT from the replaced JWT: %v, want ErrOperatorChanged", err)
	}
}

func testInitOperatorRejectsMismatch(t *testing.T, s Store) {
	tests := []struct {
		name   string
		mutate func(f *operatorFixture)
	}{
		{"system account key differs", func(f *operatorFixture) { f.op.SystemAccount = key("A") }},
		{"control account key differs", func(f *operatorFixture) { f.op.ControlAccount = key("A") }},
		{"sys has tenant kind", func(f *operatorFixture) { f.sys.Kind = provisioning.KindTenant }},
		{"control has system kind", func(f *operatorFixture) { f.control.Kind = provisioning.KindSystem }},
		{"no operator key", func(f *operatorFixture) { f.op.PubKey = "" }},
	}
	for _, tc := range tests {
		f := newOperator()
		tc.mutate(&f)
		err := s.InitOperator(ctx(t), f.op, f.sys, f.control)
		wantErr(t, tc.name, err, provisioning.ErrInvalidOperator)
	}
	_, err := s.Operator(ctx(t))
	wantErr(t, "Operator after refused inits", err, provisioning.ErrNoOperator)
}
