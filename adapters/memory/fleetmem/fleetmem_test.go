package fleetmem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/fleetmem"
	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/core/fleet/fleettest"
)

func TestContract(t *testing.T) {
	fleettest.Run(t, func(t *testing.T) fleettest.Store {
		return memtest.Store(t, fleetmem.New, fleetmem.Config{})
	})
}
