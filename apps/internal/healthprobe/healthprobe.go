// Package healthprobe implements the `healthcheck` subcommand of RXC's
// binaries: a GET of the service's own /healthz on loopback, so container
// runtimes without a shell or curl (distroless images) can probe it.
package healthprobe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Check GETs http://<loopback>:<port of listenAddr><path> and returns nil on
// a 2xx answer. A listen address without a host means the service listens on
// all interfaces, so loopback reaches it.
func Check(ctx context.Context, listenAddr, path string) error {
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", listenAddr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
