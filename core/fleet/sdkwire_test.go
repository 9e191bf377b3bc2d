package fleet_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
)

// sdkTestdata is where the agent SDK (its own module, sdk/) keeps the bytes
// it sends, written and checked by its own tests; reading them here holds
// both ends to one text without either module linking the other.
var sdkTestdata = filepath.Join("..", "..", "sdk", "sensorclient", "testdata")

// TestRenewalMessageOfTheSDK: the agent signs (sdk/sensorclient's
// TestRenewalMessageGolden) exactly what the control plane verifies.
func TestRenewalMessageOfTheSDK(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	signed, err := os.ReadFile(filepath.Join(sdkTestdata, "renewal-message.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fleet.RenewalMessage("s-1", csr, at); !bytes.Equal(signed, got) {
		t.Errorf("agent signs %q, control plane verifies %q", signed, got)
	}
}

// TestEnrolmentMessageOfTheSDK: the agent signs (sdk/sensorclient's
// TestEnrolmentMessageGolden) exactly what the control plane verifies.
func TestEnrolmentMessageOfTheSDK(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
	csr := []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	signed, err := os.ReadFile(filepath.Join(sdkTestdata, "enrolment-message.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fleet.EnrolmentMessage("s-1", csr, at); !bytes.Equal(signed, got) {
		t.Errorf("agent signs %q, control plane verifies %q", signed, got)
	}
	if bytes.Equal(fleet.RenewalMessage("s-1", csr, at), signed) {
		t.Error("an enrolment's proof would serve as a renewal's")
	}
}
