// Package pgoutage tells a PostgreSQL that cannot be reached (stopped,
// restarting, refusing connections, a connection cut mid-query) apart from a
// query PostgreSQL refused. Edges answer the first with 503 and Retry-After
// (gRPC Unavailable) and a stable code, never as an internal error; the
// caller may retry, the request was not completed.
package pgoutage

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Is reports whether err means PostgreSQL was unavailable.
func Is(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableCode(pgErr.Code)
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, context.DeadlineExceeded) && pgconn.Timeout(err):
		// A query or pool acquisition that ran out of its own time bound.
		return true
	}
	// pgx reports a connection it closed after a failure by this text only.
	return strings.Contains(err.Error(), "conn closed")
}

// unavailableCode reports whether a SQLSTATE says the server cannot serve
// now: connection exceptions (class 08), shutdown and start-up (57P01–57P03),
// too many connections (53300).
func unavailableCode(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"):
		return true
	case code == "57P01", code == "57P02", code == "57P03", code == "53300":
		return true
	}
	return false
}
