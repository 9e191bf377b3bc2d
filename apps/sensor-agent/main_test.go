package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rxc-project/rxc/internal/logbuf"
)

// The binary turns SIGINT and SIGTERM into a clean stop (exit 0).
func TestBinaryStopsOnSignals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sensor-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "sensor-agent ") {
		t.Fatalf("version: %q %v", out, err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			// Nothing listens on port 1: the agent retries its redemption
			// until the signal arrives.
			cmd := exec.Command(bin, "run", "--api", "http://127.0.0.1:1", "--state-dir", filepath.Join(t.TempDir(), "s"))
			cmd.Env = append(os.Environ(), "RXC_CLAIM_CODE=CODE-FOR-SIGNAL-TEST")
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), "redeem claim code failed") {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("no redemption attempt within 10s: %s", stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit after %s: %v\n%s", sig, err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("still running 10s after %s", sig)
			}
		})
	}
}

type lockedBuffer = logbuf.Buffer
