package controlplanestore_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/audit/audittest"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	fleettest.Run(t, func(t *testing.T) fleettest.Store {
		s, err := controlplanestore.New(controlplanestore.Config{Pool: newPool(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOperatorsContract(t *testing.T) {
	t.Parallel()
	operatorstest.Run(t, func(t *testing.T) operators.Store {
		s, err := controlplanestore.New(controlplanestore.Config{Pool: newPool(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestAuditContract(t *testing.T) {
	t.Parallel()
	audittest.Run(t, func(t *testing.T) audit.Store {
		s, err := controlplanestore.New(controlplanestore.Config{Pool: newPool(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
