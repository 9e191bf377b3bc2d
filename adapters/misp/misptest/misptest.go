// Package misptest runs a local server that speaks MISP's
// POST /attributes/restSearch (Authorization: <key>, Accept:
// application/json, body {"value", "returnFormat": "json", "limit"},
// answer {"response": {"Attribute": [...]}}), for enrichment tests.
package misptest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Attribute is one MISP attribute the server knows.
type Attribute struct {
	Value, Type, Category string
	// EventInfo is the title of the MISP event holding it.
	EventInfo string
}

// Server is a fake MISP.
type Server struct {
	URL string
	Key string

	mu       sync.Mutex
	attrs    []Attribute
	hang     bool
	searched []string
	refused  int
	release  chan struct{}
}

// New starts a plain-HTTP fake; NewTLS one with a self-signed certificate.
func New(t testing.TB, key string, attrs ...Attribute) *Server {
	t.Helper()
	return start(t, httptest.NewServer, key, attrs)
}

// NewTLS is New over TLS with httptest's self-signed certificate.
func NewTLS(t testing.TB, key string, attrs ...Attribute) *Server {
	t.Helper()
	return start(t, httptest.NewTLSServer, key, attrs)
}

// start serves the fake with listen (httptest.NewServer or NewTLSServer).
func start(t testing.TB, listen func(http.Handler) *httptest.Server, key string, attrs []Attribute) *Server {
	s := &Server{Key: key, attrs: attrs, release: make(chan struct{})}
	hs := listen(http.HandlerFunc(s.serve))
	t.Cleanup(func() { s.Release(); hs.Close() })
	s.URL = hs.URL
	return s
}

// SetHang makes searches wait until Release (or the client gives up).
func (s *Server) SetHang(h bool) { s.mu.Lock(); s.hang = h; s.mu.Unlock() }

// Release ends every hanging search.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// Searched lists the values searched for with the right key.
func (s *Server) Searched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.searched...)
}

// Refused counts requests refused for a wrong key or format.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	refuse := func(code int, msg string) {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"name": msg, "message": msg, "url": r.URL.Path})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/attributes/restSearch" {
		refuse(http.StatusNotFound, "not found")
		return
	}
	if r.Header.Get("Authorization") != s.Key {
		refuse(http.StatusForbidden, "Authentication failed. Please make sure you pass the API key of an API enabled user along in the Authorization header.")
		return
	}
	if r.Header.Get("Accept") != "application/json" {
		refuse(http.StatusNotAcceptable, "Accept must be application/json")
		return
	}
	var req struct {
		Value        string `json:"value"`
		ReturnFormat string `json:"returnFormat"`
		Limit        int    `json:"limit"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ReturnFormat != "json" || req.Value == "" || req.Limit < 1 {
		refuse(http.StatusBadRequest, "bad search")
		return
	}
	s.mu.Lock()
	s.searched = append(s.searched, req.Value)
	hang := s.hang
	s.mu.Unlock()
	if hang {
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		return
	}
	attrs := []map[string]any{}
	for _, a := range s.attrs {
		if a.Value == req.Value && len(attrs) < req.Limit {
			attrs = append(attrs, map[string]any{
				"id": "1", "event_id": "4711", "value": a.Value, "type": a.Type, "category": a.Category, "to_ids": true,
				"Event": map[string]any{"id": "4711", "info": a.EventInfo, "org_id": "1", "distribution": "1"},
			})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"response": map[string]any{"Attribute": attrs}})
}
