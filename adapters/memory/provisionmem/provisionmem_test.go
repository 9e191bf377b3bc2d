package provisionmem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/storetest"
)

var _ provisioning.Store = (*provisionmem.Store)(nil)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		return memtest.Store(t, provisionmem.New, provisionmem.Config{})
	})
}
