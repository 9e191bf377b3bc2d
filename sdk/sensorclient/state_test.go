package sensorclient

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// enrolledState enrols against a fake control plane and returns the state.
func enrolledState(t *testing.T) (*State, *Enroller) {
	t.Helper()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL)
	st, err := e.Enroll(context.Background(), Redemption{SensorID: "s-1", TenantID: "acme", EnrollmentToken: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return st, e
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// Not parallel: the umask is process-wide. Umask 0 is the worst case: the
// modes must come from the code, not from the environment.
func TestStateDirRoundTripAndModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	st, _ := enrolledState(t)
	st.Desired = StateRunning
	path := filepath.Join(t.TempDir(), "nested", "state")
	dir, err := OpenStateDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.Load(); !errors.Is(err, ErrNoState) {
		t.Fatalf("Load of an empty directory: %v, want ErrNoState", err)
	}
	if err := dir.Save(st); err != nil {
		t.Fatal(err)
	}
	got, err := dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got, cmpopts.EquateApproxTime(time.Microsecond)); diff != "" {
		t.Errorf("loaded state (-saved +loaded):\n%s", diff)
	}
	if m := mode(t, path); m != 0o700 {
		t.Errorf("state directory mode %04o, want 0700", m)
	}
	for _, name := range []string{KeyFile, CertFile, CAFile, CredsFile, SensorFile} {
		if m := mode(t, filepath.Join(path, name)); m != 0o600 {
			t.Errorf("%s mode %04o, want 0600", name, m)
		}
	}
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	data, _ := os.ReadFile(filepath.Join(path, SensorFile))
	for _, secret := range []string{"BEGIN", "CREDS"} {
		if strings.Contains(string(data), secret) {
			t.Errorf("sensor.json holds file content %q", secret)
		}
	}
}

func TestOpenStateDirTightensAnExistingDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStateDir(path); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o700 {
		t.Fatalf("mode %04o after OpenStateDir, want 0700", m)
	}
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, nil, 0o600)
	if _, err := OpenStateDir(file); err == nil {
		t.Fatal("OpenStateDir accepted a regular file")
	}
}

func TestLoadRefusesSecretsOthersCanRead(t *testing.T) {
	t.Parallel()
	st, _ := enrolledState(t)
	for _, name := range []string{KeyFile, CredsFile, SensorFile} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, err := OpenStateDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := dir.Save(st); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir.Path(), name), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := dir.Load(); !errors.Is(err, ErrInsecureState) {
				t.Fatalf("Load with %s at 0644: %v, want ErrInsecureState", name, err)
			}
		})
	}
}

func TestLoadRejectsIncompleteState(t *testing.T) {
	t.Parallel()
	dir, err := OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"not JSON":      "{",
		"missing token": `{"sensorId":"s-1","tenantId":"acme"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir.Path(), SensorFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := dir.Load(); err == nil || errors.Is(err, ErrNoState) {
			t.Errorf("%s: Load = %v, want a descriptive error", name, err)
		}
	}
}

// A renewal interrupted between writing the key and the certificate leaves
// a pair that does not match; Load still works and TLSCertificate says so.
func TestInterruptedRenewalIsDetected(t *testing.T) {
	t.Parallel()
	st, e := enrolledState(t)
	dir, err := OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Save(st); err != nil {
		t.Fatal(err)
	}
	next, err := e.Renew(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(filepath.Join(dir.Path(), KeyFile), next.KeyPEM); err != nil {
		t.Fatal(err)
	}
	loaded, err := dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loaded.TLSCertificate(); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("TLSCertificate after a half-written renewal: %v, want ErrKeyMismatch", err)
	}
}

func TestRedemptionIsKeptPrivatelyUntilCleared(t *testing.T) {
	t.Parallel()
	dir, err := OpenStateDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dir.LoadRedemption(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadRedemption without one: %v", err)
	}
	want := Redemption{SensorID: "s-1", TenantID: "acme", EnrollmentToken: "tok", ExpiresAt: time.Date(2026, 11, 21, 9, 15, 0, 0, time.UTC)}
	if err := dir.SaveRedemption(want); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, filepath.Join(dir.Path(), RedemptionFile)); m != 0o600 {
		t.Errorf("redemption file mode %04o, want 0600", m)
	}
	got, err := dir.LoadRedemption()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("redemption (-want +got):\n%s", diff)
	}
	if err := dir.ClearRedemption(); err != nil {
		t.Fatal(err)
	}
	if err := dir.ClearRedemption(); err != nil {
		t.Fatalf("clearing twice: %v", err)
	}
}
