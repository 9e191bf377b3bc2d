// Package loopback picks TCP ports on 127.0.0.1 for servers that tests and
// local stacks start. It picks outside the kernel's ephemeral range
// (Linux: 32768–60999 by default), which outgoing connections draw their local
// ports from: a port picked from the ephemeral range and bound a moment later
// can meanwhile be taken by any client connection on the machine, which made
// parallel test packages collide.
package loopback

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
)

// The range picked from: above the well-known and most registered service
// ports, below the ephemeral range.
const (
	lowPort  = 20000
	highPort = 32000
)

// FreePort returns a port in [20000, 32000) that was free to bind on
// 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	for range 200 {
		port := lowPort + rand.IntN(highPort-lowPort)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("loopback: no free port in 20000-32000 after 200 tries")
}
