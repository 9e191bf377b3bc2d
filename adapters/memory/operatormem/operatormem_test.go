package operatormem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/operatormem"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/core/operators/operatorstest"
)

func TestContract(t *testing.T) {
	operatorstest.Run(t, func(t *testing.T) operators.Store {
		s, err := operatormem.New(operatormem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
