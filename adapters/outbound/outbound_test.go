package outbound_test

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/rxc-project/rxc/adapters/outbound"
)

func TestBaseURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw, want string
		ok        bool
	}{
		{"https://misp.example", "https://misp.example", true},
		{"http://127.0.0.1:8080/v1//", "http://127.0.0.1:8080/v1", true},
		{"", "", false},
		{"misp.example", "", false},
		{"file:///etc/passwd", "", false},
		{"ftp://misp.example", "", false},
		{"https://", "", false},
		{"https://user:secret@misp.example", "", false},
		{"https://misp.example/%zz", "", false},
	} {
		got, err := outbound.BaseURL("misp: URL", tt.raw)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q, ok %v", tt.raw, got, err, tt.want, tt.ok)
		}
		if err != nil && (err.Error() != "misp: URL must be an http(s) URL without credentials" || strings.Contains(err.Error(), "secret")) {
			t.Errorf("BaseURL(%q) error %q", tt.raw, err)
		}
	}
}

func TestCause(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("search: %w", &url.Error{Op: "Post", URL: "https://misp.example/attributes/restSearch?value=198.51.100.7", Err: io.ErrUnexpectedEOF})
	if got := outbound.Cause(wrapped); got != io.ErrUnexpectedEOF {
		t.Errorf("Cause(url.Error) = %v, want the error it wraps", got)
	}
	plain := errors.New("plain")
	if got := outbound.Cause(plain); got != plain {
		t.Errorf("Cause(plain) = %v, want it unchanged", got)
	}
}
