// Package statusrec is the http.ResponseWriter wrapper the HTTP services
// share for noting what a handler answered: the status it wrote (200 once
// it wrote a body without one) and the bytes of the body, for metrics,
// access logs and the audit trail.
package statusrec

import (
	"io"
	"net/http"
)

// Recorder passes everything through to the ResponseWriter it wraps and
// notes the first status and the body's size.
type Recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// WriteHeader notes the first status written.
func (r *Recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// WriteString passes strings through without a copy (io.WriteString on
// the recorder would otherwise convert each body to a new byte slice).
func (r *Recorder) WriteString(s string) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := io.WriteString(r.ResponseWriter, s)
	r.bytes += int64(n)
	return n, err
}

// Wrote reports whether the handler has answered anything yet.
func (r *Recorder) Wrote() bool { return r.status != 0 }

// Code is the status answered: 200 when the handler wrote nothing.
func (r *Recorder) Code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Bytes is the size of the body written so far.
func (r *Recorder) Bytes() int64 { return r.bytes }

// Unwrap lets http.ResponseController reach the connection (flush,
// deadlines).
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
