package statusrec_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rxc-project/rxc/adapters/httpapi/statusrec"
)

func TestRecorderNotesTheFirstStatusAndTheBytes(t *testing.T) {
	tests := []struct {
		name      string
		handler   func(w http.ResponseWriter)
		wrote     bool
		code      int
		bytes     int64
		wireCode  int
		wireBytes string
	}{
		{"nothing written", func(http.ResponseWriter) {}, false, http.StatusOK, 0, http.StatusOK, ""},
		{"a body without a status", func(w http.ResponseWriter) { _, _ = w.Write([]byte("hello")) }, true, http.StatusOK, 5, http.StatusOK, "hello"},
		{"a string body", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "abc") }, true, http.StatusOK, 3, http.StatusOK, "abc"},
		{"the first status counts", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("no"))
		}, true, http.StatusNotFound, 2, http.StatusNotFound, "no"},
		{"a status after the body does not count", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("x"))
			w.WriteHeader(http.StatusTeapot)
		}, true, http.StatusOK, 1, http.StatusOK, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := httptest.NewRecorder()
			rec := &statusrec.Recorder{ResponseWriter: wire}
			tt.handler(rec)
			if rec.Wrote() != tt.wrote || rec.Code() != tt.code || rec.Bytes() != tt.bytes {
				t.Errorf("noted wrote=%v code=%d bytes=%d, want %v %d %d", rec.Wrote(), rec.Code(), rec.Bytes(), tt.wrote, tt.code, tt.bytes)
			}
			if wire.Code != tt.wireCode || wire.Body.String() != tt.wireBytes {
				t.Errorf("passed through %d %q, want %d %q", wire.Code, wire.Body, tt.wireCode, tt.wireBytes)
			}
			if rec.Unwrap() != http.ResponseWriter(wire) {
				t.Error("Unwrap does not give the wrapped writer")
			}
		})
	}
}
