package controlapi_test

import (
	"fmt"
	"net/http"
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
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := w.patch("operator", id, fmt.Sprintf(`{"labels":{"k%02d":"v"}}`, i), "application/merge-patch+json")
			if res.status != http.StatusOK && res.problemCode() != "invalid_labels" {
				t.Errorf("patch %d: %d %s", i, res.status, res.body)
			}
			codes <- res.status
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		if c == http.StatusOK {
			ok++
		}
	}
	v := w.sensorView(t, id)
	if ok != fleet.MaxLabels || len(v.Labels) != fleet.MaxLabels {
		t.Errorf("%d concurrent one-label patches: %d accepted, %d labels stored; want %d and %d", n, ok, len(v.Labels), fleet.MaxLabels, fleet.MaxLabels)
	}
}
