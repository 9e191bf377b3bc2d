// Package openaitest runs a local server that speaks the OpenAI chat
// completions wire format (GET /v1/models, POST /v1/chat/completions with
// "stream": true answering server-sent events ending in "data: [DONE]"),
// for tests of the chat without a real model.
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server is a fake model server. Its base URL (Server.URL) ends in /v1.
type Server struct {
	URL string
	Key string
	// Model is the only model it serves.
	Model string

	mu       sync.Mutex
	answer   []string
	hang     bool
	status   int
	requests []Request
	// Cancelled receives once per chat request whose client went away
	// while the server was still answering.
	Cancelled chan struct{}
}

// Request is a chat completion request as the server received it.
type Request struct {
	Authorization string
	Model         string
	Stream        bool
	Messages      []struct{ Role, Content string }
}

// New starts a server that accepts key and answers with the given pieces.
func New(t testing.TB, key, model string, answer ...string) *Server {
	t.Helper()
	s := &Server{Key: key, Model: model, answer: answer, Cancelled: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// SetHang makes the server send the first piece and then wait until the
// client goes away.
func (s *Server) SetHang(h bool) { s.mu.Lock(); s.hang = h; s.mu.Unlock() }

// SetStatus makes every call fail with status (0 restores success).
func (s *Server) SetStatus(code int) { s.mu.Lock(); s.status = code; s.mu.Unlock() }

// Requests returns the chat requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	status := s.status
	s.mu.Unlock()
	if status != 0 {
		http.Error(w, `{"error":{"message":"unavailable"}}`, status)
		return false
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		// Like OpenAI, quote the key that was refused.
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
		return false
	}
	return true
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","owned_by":"test"}]}`, s.Model)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req)
	answer, hang := s.answer, s.hang
	s.mu.Unlock()
	if req.Model != s.Model {
		http.Error(w, `{"error":{"message":"model not found"}}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(piece string) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": s.Model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": piece}, "finish_reason": nil}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		flusher.Flush()
	}
	for i, piece := range answer {
		send(piece)
		if hang && i == 0 {
			<-r.Context().Done()
			s.Cancelled <- struct{}{}
			return
		}
	}
	fmt.Fprint(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	flusher.Flush()
}
