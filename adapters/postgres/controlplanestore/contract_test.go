package controlplanestore_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/core/audit/audittest"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

// The store passes each contract suite of the ports it implements, every
// case on a fresh database.

func TestContract(t *testing.T) {
	t.Parallel()
	fleettest.Run(t, func(t *testing.T) fleettest.Store { return newStore(t) })
}

func TestOperatorsContract(t *testing.T) {
	t.Parallel()
	operatorstest.Run(t, func(t *testing.T) operators.Store { return newStore(t) })
}

func TestAuditContract(t *testing.T) {
	t.Parallel()
	audittest.Run(t, func(t *testing.T) audittest.Store { return newStore(t) })
}

// newStore is a store on a fresh database.
func newStore(t *testing.T) *controlplanestore.Store {
	t.Helper()
	return storeOn(t, newPool(t))
}
