package controlapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/rxc-project/rxc/core/fleet"
)

// TestAttackLabelsPastTheLimitByConcurrentPatches: many small merge
// patches sent at once, each adding one new label to the same sensor,
// cannot together give it more than fleet.MaxLabels: each patch is
// checked against the labels the one before it left.
func TestAttackLabelsPastTheLimitByConcurrentPatches(t *testing.T) {
	w := newRBACWorld(t)
	id, _ := w.e.enroll("acme")
	const n = fleet.MaxLabels + 8
	patches := atOnce(n, func(i int) response {
		return w.patch("operator", id, fmt.Sprintf(`{"labels":{"k%02d":"v"}}`, i), "application/merge-patch+json")
	})
	ok := 0
	for i, res := range patches {
		if res.status == http.StatusOK {
			ok++
		} else if res.problemCode() != "invalid_labels" {
			t.Errorf("patch %d: %d %s", i, res.status, res.body)
		}
	}
	v := w.sensorView(t, id)
	if ok != fleet.MaxLabels || len(v.Labels) != fleet.MaxLabels {
		t.Errorf("%d concurrent one-label patches: %d accepted, %d labels stored; want %d and %d", n, ok, len(v.Labels), fleet.MaxLabels, fleet.MaxLabels)
	}
}

// TestAttackDecommissionRacingEnrolment: a pending sensor enrols while an
// operator decommissions it. Whichever wins, the sensor ends
// decommissioned and revoked, and a NATS user minted for the enrolment
// does not outlive it.
func TestAttackDecommissionRacingEnrolment(t *testing.T) {
	e := newEnv(t, options{provisioning: true})
	e.createTenant("acme")
	for round := range 6 {
		id, token := e.redeem("acme")
		csr := jsonString(t, map[string]string{"csr": newCSR(t)})
		var enrol, decom response
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			enrol = e.do(request{method: "POST", path: "/api/sensors/" + id + "/agent/enroll", body: csr,
				header: map[string]string{"Authorization": "Bearer " + token}})
		}()
		go func() {
			defer wg.Done()
			decom = e.do(request{method: "DELETE", path: "/api/sensors/" + id, operator: true})
		}()
		wg.Wait()
		decom.expectStatus(t, fmt.Sprintf("round %d: decommission", round), http.StatusNoContent)
		if enrol.status != http.StatusCreated && enrol.status != http.StatusUnauthorized && enrol.status != http.StatusForbidden {
			t.Errorf("round %d: enrolment answered %d %s", round, enrol.status, enrol.body)
		}
		s, err := e.fleet.Sensor(context.Background(), id)
		if err != nil || s.DecommissionedAt.IsZero() || s.State != fleet.StateRevoked {
			t.Errorf("round %d (enrol %d): sensor after the race %+v, %v; want decommissioned and revoked", round, enrol.status, s, err)
		}
		minted := slices.Contains(e.prov.Calls(), "EnsureSensorUser acme "+id)
		revoked := slices.Contains(e.prov.Revocations(), [2]string{"A-acme", "U-" + id})
		if minted && !revoked {
			t.Errorf("round %d (enrol %d): the NATS user minted for the enrolment outlives the decommission", round, enrol.status)
		}
	}
}
