package edgetest_test

import (
	"net/http/httptest"
	"testing"

	"github.com/rxc-project/rxc/adapters/httpapi/edgetest"
)

func TestCheckAnswer(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		ok          bool
	}{
		{"a JSON answer", 200, "application/json", `{"id":"x"}`, true},
		{"a problem", 400, "application/problem+json", `{"code":"invalid_json"}`, true},
		{"a 5xx", 500, "application/problem+json", `{"code":"internal"}`, false},
		{"not JSON", 200, "text/plain", `hello`, false},
		{"a JSON list", 200, "application/json", `[]`, false},
		{"an error as plain JSON", 404, "application/json", `{"code":"not_found"}`, false},
		{"a problem without a code", 400, "application/problem+json", `{"title":"Bad"}`, false},
		{"a problem with an empty code", 400, "application/problem+json", `{"code":""}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Type", tt.contentType)
			rec.WriteHeader(tt.status)
			_, _ = rec.WriteString(tt.body)
			if err := edgetest.CheckAnswer(rec); (err == nil) != tt.ok {
				t.Errorf("CheckAnswer: %v, want ok %v", err, tt.ok)
			}
		})
	}
}
