package controlapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"go.yaml.in/yaml/v3"

	"github.com/rxc-project/rxc/sdk/problem"
)

// openAPISource is the API's OpenAPI 3.1 description; a test holds it to
// the routes in both directions and validates real traffic against it.
//
//go:embed openapi.yaml
var openAPISource []byte

// OpenAPI returns the API's OpenAPI 3.1 description as JSON, with the
// problem-code catalogue filled in (the Problem schema's code enum and
// x-problem-codes).
func OpenAPI() ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(openAPISource, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	codes := make([]any, 0, len(problem.Catalogue))
	listed := make([]any, 0, len(problem.Catalogue))
	for _, e := range problem.Catalogue {
		codes = append(codes, e.Code)
		listed = append(listed, map[string]any{"code": e.Code, "status": e.Status, "title": e.Title, "meaning": e.Meaning})
	}
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	props, _ := schemas["Problem"].(map[string]any)["properties"].(map[string]any)
	code, ok := props["code"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapi.yaml: components.schemas.Problem.properties.code is missing")
	}
	code["enum"] = codes
	doc["x-problem-codes"] = listed
	return json.Marshal(doc)
}

func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.openAPIDoc)
}

// Routes lists the API's routes as "METHOD /path" patterns.
func (a *API) Routes() []string { return append([]string(nil), a.patterns...) }
