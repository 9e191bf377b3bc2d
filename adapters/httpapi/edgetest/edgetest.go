// Package edgetest holds what the HTTP edges' tests share: the check that
// an answer to an arbitrary request body is one an edge may give.
package edgetest

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
)

// CheckAnswer returns why rec is not an answer an edge may give to any
// body, or nil: never a 5xx, always a JSON object, and every 4xx an
// application/problem+json document with a code.
func CheckAnswer(rec *httptest.ResponseRecorder) error {
	if rec.Code >= 500 {
		return fmt.Errorf("status %d: %s", rec.Code, rec.Body)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		return fmt.Errorf("answer is not a JSON object: %q", rec.Body)
	}
	if rec.Code >= 400 {
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" || doc["code"] == nil || doc["code"] == "" {
			return fmt.Errorf("%d is not a problem document: %s %s", rec.Code, ct, rec.Body)
		}
	}
	return nil
}
