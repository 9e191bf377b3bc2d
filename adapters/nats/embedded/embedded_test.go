package embedded_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rxc-project/rxc/adapters/nats/embedded"
)

func writeConf(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The server runs the file's configuration, writes its log where asked and
// stops when told.
func TestStartRunsTheConfigurationFile(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "nats.log")
	conf := writeConf(t, fmt.Sprintf("listen: 127.0.0.1:-1\nserver_name: embedded-test\njetstream {\n  store_dir: %q\n}\n", filepath.Join(dir, "js")))
	ns, err := embedded.Start(conf, embedded.Options{LogFile: logFile})
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Name(); got != "embedded-test" {
		t.Errorf("server_name = %q, want the file's embedded-test", got)
	}
	if !ns.JetStreamEnabled() {
		t.Error("JetStream is off although the file switches it on")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	nc.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	if nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client connected after Shutdown")
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("log file: %v", err)
	}
	if !strings.Contains(string(log), "Server is ready") {
		t.Errorf("the log does not record the start:\n%s", log)
	}
}

func TestStartRejectsABrokenFile(t *testing.T) {
	for name, body := range map[string]string{
		"syntax":         "listen: 127.0.0.1:-1\nno_such_block {\n",
		"unknown option": "listen: 127.0.0.1:-1\nno_such_option: 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			ns, err := embedded.Start(writeConf(t, body), embedded.Options{})
			if err == nil {
				ns.Shutdown()
				t.Fatal("a broken configuration started a server")
			}
			if !strings.Contains(err.Error(), "nats-server config") {
				t.Errorf("err = %v, want it to name the configuration", err)
			}
		})
	}
}
