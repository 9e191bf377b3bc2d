// Package problem writes RFC 9457 problem details (application/problem+json)
// with a stable machine-readable `code` member, and decodes JSON request
// bodies with the size and syntax checks every RXC HTTP edge applies. Both
// the provisioner's and the control plane's APIs use it so that clients see
// one error shape.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ContentType is the media type of problem responses.
const ContentType = "application/problem+json"

// Problem is an RFC 9457 problem document with RXC's `code` extension.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Code     Code   `json:"code"`
	Instance string `json:"instance,omitempty"`
}

// Error lets a Problem travel as an error until an edge writes it.
func (p *Problem) Error() string { return string(p.Code) + ": " + p.Detail }

// New returns a problem whose type is derived from its code. Outside this
// package problems come from For, which takes status and title from the
// catalogue (internal/archtest forbids New with a literal status elsewhere).
func New(status int, code Code, title, detail string) *Problem {
	return &Problem{Type: "urn:rxc:problem:" + string(code), Title: title, Status: status, Detail: detail, Code: code}
}

// Write sends p. The instance member is the request path when unset.
func Write(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// Common problems shared by every edge.
func BodyTooLarge(limit int64) *Problem {
	return For(CodeBodyTooLarge, fmt.Sprintf("the body must not exceed %d bytes", limit))
}

// InvalidJSON is answered for malformed bodies.
func InvalidJSON(detail string) *Problem {
	return For(CodeInvalidJSON, detail)
}

// DecodeJSON reads at most limit bytes of r's body into dst. It insists on a
// JSON content type (when one is given), a single JSON value, and no unknown
// fields. The returned error is a *Problem ready to Write.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) *Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return For(CodeUnsupportedMediaType, "send application/json")
		}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeProblem(err, limit)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		if err != nil {
			if p := decodeProblem(err, limit); p.Code == CodeBodyTooLarge {
				return p
			}
		}
		return InvalidJSON("the body must hold exactly one JSON value")
	}
	return nil
}

func decodeProblem(err error, limit int64) *Problem {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return BodyTooLarge(limit)
	case errors.Is(err, io.EOF):
		return InvalidJSON("the body is empty")
	case errors.As(err, &syntax):
		return InvalidJSON(fmt.Sprintf("syntax error at byte %d", syntax.Offset))
	case errors.As(err, &typeErr):
		return InvalidJSON(fmt.Sprintf("field %q must be of type %s", typeErr.Field, typeErr.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return InvalidJSON(strings.TrimPrefix(err.Error(), "json: "))
	default:
		return InvalidJSON("the body is not valid JSON")
	}
}

// WriteJSON sends v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Is matches an error that is any of targets (errors.Is): the match of a
// row in the tables that map errors to problem codes at each edge.
func Is(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}
