package healthprobe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ok.Close)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(bad.Close)
	_, okPort, _ := net.SplitHostPort(ok.Listener.Addr().String())
	_, badPort, _ := net.SplitHostPort(bad.Listener.Addr().String())
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	tests := []struct {
		name, addr string
		wantErr    bool
	}{
		{"healthy, all interfaces", ":" + okPort, false},
		{"healthy, explicit loopback", "127.0.0.1:" + okPort, false},
		{"unhealthy", ":" + badPort, true},
		{"nothing listening", closed, true},
		{"malformed address", "no-port", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(context.Background(), tt.addr, "/healthz")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Check(%q) = %v, want error %v", tt.addr, err, tt.wantErr)
			}
		})
	}
}
