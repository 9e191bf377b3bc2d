package controlapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// Attack: an operator granted acme and globex commands a globex sensor in a
// batch with an Idempotency-Key; a token of the same operator narrowed to
// acme (or the operator after losing globex) repeats that request with the
// key. The repeat must not hand it the globex batch: GET of the batch is
// refused to the token, and so must the repeat be. Positive control: the
// token's own batch on acme is answered, and the operator's session gets
// its repeat.
func TestAttackBatchIdempotencyRepeatOutsideScope(t *testing.T) {
	w := newRBACWorld(t)
	e := w.e
	var ops struct{ Items []struct{ ID, Email string } }
	if err := json.Unmarshal(e.do(request{method: "GET", path: "/api/operators", operator: true}).body, &ops); err != nil {
		t.Fatal(err)
	}
	var opID string
	for _, o := range ops.Items {
		if o.Email == "operator@acme.example" {
			opID = o.ID
		}
	}
	e.do(request{method: "PATCH", path: "/api/operators/" + opID, operator: true, body: `{"tenants":["acme","globex"]}`}).
		expect(t, "grant globex", http.StatusOK, "")
	res := e.do(request{method: "POST", path: "/api/tokens", session: w.sessions["operator"], body: `{"name":"acme only","role":"operator","tenants":["acme"]}`})
	res.expect(t, "narrowed token", http.StatusCreated, "")
	w.tokens["acme-token"] = str(t, res.object(t), "token")

	globex := fmt.Sprintf(`{"action":"start","sensorIds":[%q]}`, w.sensor["globex"])
	key := map[string]string{"Idempotency-Key": "batch-key-1"}
	res = w.as("operator", request{method: "POST", path: "/api/commands", body: globex, header: key})
	res.expect(t, "operator's globex batch", http.StatusAccepted, "")
	batchID := str(t, res.object(t), "batchId")
	w.as("operator", request{method: "POST", path: "/api/commands", body: globex, header: key}).
		expect(t, "positive control: the operator's own repeat", http.StatusOK, "")
	w.as("acme-token", request{method: "GET", path: "/api/commands/batches/" + batchID}).
		expect(t, "the acme token reads the globex batch", http.StatusNotFound, "not_found")
	w.as("acme-token", request{method: "POST", path: "/api/commands", body: fmt.Sprintf(`{"action":"start","sensorIds":[%q]}`, w.sensor["acme"])}).
		expect(t, "positive control: the acme token's own batch", http.StatusAccepted, "")

	rq := request{method: "POST", path: "/api/commands", body: globex, header: map[string]string{"Idempotency-Key": "batch-key-1", "Authorization": "Bearer " + w.tokens["acme-token"]}}
	if res := e.do(rq); res.status < 400 {
		t.Fatalf("BROKEN: the acme-only token got the globex batch by repeating its Idempotency-Key: %d %s", res.status, res.body)
	}
	filter := `{"action":"stop","filter":{}}`
	w.as("operator", request{method: "POST", path: "/api/commands", body: filter, header: map[string]string{"Idempotency-Key": "batch-key-2"}}).
		expect(t, "operator's batch over all its tenants", http.StatusAccepted, "")
	rq = request{method: "POST", path: "/api/commands", body: filter, header: map[string]string{"Idempotency-Key": "batch-key-2", "Authorization": "Bearer " + w.tokens["acme-token"]}}
	if res := e.do(rq); res.status < 400 {
		t.Fatalf("BROKEN: the acme-only token got a batch touching globex by repeating its Idempotency-Key: %d %s", res.status, res.body)
	}
}
