package auditmem_test

import (
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/auditmem"
	"github.com/rxc-project/rxc/core/audit/audittest"
)

func TestContract(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audittest.Store {
		s, err := auditmem.New(auditmem.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
