// Package embedded runs a nats-server inside this process from a
// configuration file, the same file an external nats-server would read. The
// test harness's servers (internal/natstest) and the local development
// stack's long-lived one both start here, so both run a configuration the
// way production reads it. It does not link the testing package, so
// binaries may use it.
package embedded

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options tune how the server runs in this process.
type Options struct {
	// LogFile receives the server's log, with timestamps; empty: no log.
	LogFile string
	// ReadyTimeout bounds Start; defaults to 30s.
	ReadyTimeout time.Duration
}

// Start reads the configuration file, starts the server and waits until it
// accepts client connections. The server ignores signals: stopping it is
// the caller's job (Shutdown, then WaitForShutdown).
func Start(configFile string, o Options) (*server.Server, error) {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	opts, err := server.ProcessConfigFile(configFile)
	if err != nil {
		return nil, fmt.Errorf("nats-server config: %w", err)
	}
	opts.NoSigs = true
	if o.LogFile != "" {
		opts.LogFile, opts.Logtime = o.LogFile, true
	} else {
		opts.NoLog = true
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	if o.LogFile != "" {
		ns.ConfigureLogger()
	}
	go ns.Start()
	if !ns.ReadyForConnections(o.ReadyTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("nats-server not ready within %s", o.ReadyTimeout)
	}
	return ns, nil
}
