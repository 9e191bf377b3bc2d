package operatormem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/adapters/memory/operatormem"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

func TestContract(t *testing.T) {
	operatorstest.Run(t, func(t *testing.T) operators.Store {
		return memtest.Store(t, operatormem.New, operatormem.Config{})
	})
}
