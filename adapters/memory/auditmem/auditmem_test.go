package auditmem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/auditmem"
	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/core/audit/audittest"
)

func TestContract(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audittest.Store {
		return memtest.Store(t, auditmem.New, auditmem.Config{})
	})
}
