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

// The sensor, CSR and signing time the SDK's golden messages are made of.
var (
	sdkSensor = "s-1"
	sdkCSR    = []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n")
	sdkAt     = time.Date(2026, 11, 21, 9, 0, 0, 123456789, time.FixedZone("x", 3600))
)

// sdkSigns checks that the bytes the agent signs, in the SDK's testdata
// file, are what message gives the control plane to verify, and returns
// them.
func sdkSigns(t *testing.T, file string, message func(sensorID string, csrPEM []byte, signedAt time.Time) []byte) []byte {
	t.Helper()
	signed, err := os.ReadFile(filepath.Join(sdkTestdata, file))
	if err != nil {
		t.Fatal(err)
	}
	if got := message(sdkSensor, sdkCSR, sdkAt); !bytes.Equal(signed, got) {
		t.Errorf("agent signs %q, control plane verifies %q", signed, got)
	}
	return signed
}

// TestRenewalMessageOfTheSDK: the agent signs (sdk/sensorclient's
// TestRenewalMessageGolden) exactly what the control plane verifies.
func TestRenewalMessageOfTheSDK(t *testing.T) {
	t.Parallel()
	sdkSigns(t, "renewal-message.txt", fleet.RenewalMessage)
}

// TestEnrolmentMessageOfTheSDK: the agent signs (sdk/sensorclient's
// TestEnrolmentMessageGolden) exactly what the control plane verifies.
func TestEnrolmentMessageOfTheSDK(t *testing.T) {
	t.Parallel()
	signed := sdkSigns(t, "enrolment-message.txt", fleet.EnrolmentMessage)
	if bytes.Equal(fleet.RenewalMessage(sdkSensor, sdkCSR, sdkAt), signed) {
		t.Error("an enrolment's proof would serve as a renewal's")
	}
}
