package sensorclient

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// enrolledIn enrols a sensor with the fake plane and saves it in a fresh
// state directory.
func enrolledIn(t *testing.T, p *fakePlane, e *Enroller) (*StateDir, *State) {
	t.Helper()
	ctx := context.Background()
	red, err := e.Redeem(ctx, "GOOD-CODE", "edge-1.local")
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Enroll(ctx, red)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := OpenStateDir(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Save(st); err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func (p *fakePlane) renewCSRs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.requests {
		if filepath.Base(r.path) == "renew" {
			out = append(out, r.body["csr"])
		}
	}
	return out
}

// A renewal that failed (here: 503, as when the answer is lost) is sent
// again with the same CSR, so the control plane can recognise it; a refusal
// of the request itself (400) starts over with a new key.
func TestRenewInSendsTheSameRequestAgainUntilAnswered(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL+"/api/")
	dir, st := enrolledIn(t, p, e)
	ctx := context.Background()
	renew := "/api/sensors/s-1/agent/renew"

	p.mu.Lock()
	p.answer[renew] = http.StatusServiceUnavailable
	p.mu.Unlock()
	for range 2 {
		if _, err := e.RenewIn(ctx, dir, st); err == nil {
			t.Fatal("renewal answered 503 succeeded")
		}
	}
	// A restarted agent reads the journal from disk.
	reopened, err := OpenStateDir(dir.Path())
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	delete(p.answer, renew)
	p.mu.Unlock()
	next, err := e.RenewIn(ctx, reopened, st)
	if err != nil {
		t.Fatal(err)
	}
	csrs := p.renewCSRs()
	if len(csrs) != 3 || csrs[0] != csrs[1] || csrs[1] != csrs[2] || csrs[0] == "" {
		t.Fatalf("CSRs sent: %d, equal: %v; want the same one three times", len(csrs), len(csrs) == 3 && csrs[0] == csrs[1] && csrs[1] == csrs[2])
	}
	if _, err := next.TLSCertificate(); err != nil || next.Serial == st.Serial {
		t.Fatalf("renewed state: serial %s (was %s), %v", next.Serial, st.Serial, err)
	}
	// Answered but not yet saved (say, the disk was full): asking again
	// would present a replaced token, so the journaled answer is used.
	again, err := e.RenewIn(ctx, dir, st)
	if err != nil || again.Serial != next.Serial || len(p.renewCSRs()) != 3 {
		t.Fatalf("renewal after an unsaved answer: serial %s (want %s), %d requests, %v", again.Serial, next.Serial, len(p.renewCSRs()), err)
	}
	if err := dir.Save(next); err != nil {
		t.Fatal(err)
	}
	if err := dir.ClearRenewal(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir.Path(), RenewalFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal after the renewal was saved: %v", err)
	}

	// Malformed (400): the journal ends, the next attempt has a new key.
	p.mu.Lock()
	p.answer[renew] = http.StatusBadRequest
	p.mu.Unlock()
	if _, err := e.RenewIn(ctx, dir, next); err == nil {
		t.Fatal("renewal answered 400 succeeded")
	}
	if _, err := e.RenewIn(ctx, dir, next); err == nil {
		t.Fatal("renewal answered 400 succeeded")
	}
	csrs = p.renewCSRs()
	if len(csrs) != 5 || csrs[3] == csrs[4] {
		t.Errorf("after a 400 the same CSR was sent again")
	}
}

// An agent that dies while saving a renewed state (the key written, the
// certificate and sensor.json not) finds a working state on the next Load:
// the journaled answer completes the save.
func TestLoadCompletesAnInterruptedSave(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL+"/api/")
	p.mu.Lock()
	p.renewCreds = "NEW-CREDS"
	p.mu.Unlock()
	for name, written := range map[string][]string{
		"key only":             {KeyFile},
		"key and certificate":  {KeyFile, CertFile, CAFile, CredsFile},
		"nothing of the state": nil,
	} {
		t.Run(name, func(t *testing.T) {
			dir, st := enrolledIn(t, p, e)
			next, err := e.RenewIn(context.Background(), dir, st)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{KeyFile: next.KeyPEM, CertFile: next.CertPEM, CAFile: next.CAPEM, CredsFile: next.Creds}
			for _, f := range written {
				if err := writeAtomic(filepath.Join(dir.Path(), f), files[f]); err != nil {
					t.Fatal(err)
				}
			}
			got, err := dir.Load()
			if err != nil {
				t.Fatalf("Load after an interrupted save: %v", err)
			}
			if _, err := got.TLSCertificate(); err != nil {
				t.Fatalf("loaded certificate: %v", err)
			}
			if got.Serial != next.Serial || got.SensorToken != next.SensorToken || string(got.Creds) != "NEW-CREDS" {
				t.Errorf("loaded serial %s token %q creds %q; want %s %q NEW-CREDS", got.Serial, got.SensorToken, got.Creds, next.Serial, next.SensorToken)
			}
			if _, err := os.Stat(filepath.Join(dir.Path(), RenewalFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("journal left after completing the save: %v", err)
			}
			if again, err := dir.Load(); err != nil || again.Serial != next.Serial {
				t.Errorf("second Load: %v", err)
			}
		})
	}
}

// A journal is a secret (the new key, the sensor token of the answer).
func TestRenewalJournalIsPrivate(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL+"/api/")
	dir, st := enrolledIn(t, p, e)
	if _, err := e.RenewIn(context.Background(), dir, st); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir.Path(), RenewalFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if err := os.Chmod(filepath.Join(dir.Path(), RenewalFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Load(); !errors.Is(err, ErrInsecureState) {
		t.Errorf("Load with a world-readable journal: %v, want ErrInsecureState", err)
	}
}
