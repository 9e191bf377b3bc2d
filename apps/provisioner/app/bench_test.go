package app_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// BenchmarkCreateSensorUser measures POST /users end to end: id checks,
// user minting, sealing, the PostgreSQL insert and the JetStream consumer.
func BenchmarkCreateSensorUser(b *testing.B) {
	s := provisionertest.Start(b, provisionertest.Options{})
	status, body := s.Post("/accounts", map[string]string{"tenantId": "bench"})
	if status != 201 {
		b.Fatalf("%d %s", status, body)
	}
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			status, body := s.Post("/users", map[string]string{"tenantId": "bench", "sensorId": fmt.Sprintf("s%d", n.Add(1))})
			if status != 201 {
				b.Errorf("%d %s", status, body)
				return
			}
		}
	})
}

// BenchmarkResolve measures the resolver's GET of a cached account JWT.
func BenchmarkResolve(b *testing.B) {
	s := provisionertest.Start(b, provisionertest.Options{NoNATS: true})
	var acct struct{ AccountPubKey string }
	status, body := s.Post("/accounts", map[string]string{"tenantId": "bench"})
	if status != 201 {
		b.Fatalf("%d %s", status, body)
	}
	decodeInto(b, body, &acct)
	url := s.URL + "/jwt/v1/accounts/" + acct.AccountPubKey
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			getOK(b, url)
		}
	})
}
