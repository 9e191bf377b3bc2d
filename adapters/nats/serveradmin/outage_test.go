package serveradmin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A drop can reach a call as nats.go's own error before the disconnect
// handler ends the session (CI saw ErrReconnectBufExceeded from a publish);
// outage must class those as the connection going away, and nothing else.
func TestOutage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"publish while reconnecting", nats.ErrReconnectBufExceeded, true},
		{"wrapped by JetStream", fmt.Errorf("nats: stream RXC_CMD: %w", nats.ErrReconnectBufExceeded), true},
		{"closed", nats.ErrConnectionClosed, true},
		{"reconnecting", nats.ErrConnectionReconnecting, true},
		{"stale", nats.ErrStaleConnection, true},
		{"timeout", nats.ErrTimeout, false},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"no responders", nats.ErrNoResponders, false},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := outage(tt.err); got != tt.want {
				t.Errorf("outage(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
