package loopback

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortIsBindableAndOutsideTheEphemeralRange(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowPort || p >= highPort {
			t.Fatalf("port %d outside [%d, %d)", p, lowPort, highPort)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 40 {
		t.Fatalf("only %d distinct ports in 50 picks", len(seen))
	}
}
