package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

type noNATS struct{}

func (noNATS) PushAccount(context.Context, string, string) error     { return nil }
func (noNATS) EnsureConsumer(context.Context, topology.Sensor) error { return nil }

// BenchmarkRefreshAccounts measures what serve's start-up check costs per
// account when every JWT is current (the usual restart): decoding the stored
// JWT, signing the claims afresh and comparing. The store is in memory, so
// PostgreSQL's one read of all accounts is not included.
func BenchmarkRefreshAccounts(b *testing.B) {
	const tenants = 1000
	_, opSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		b.Fatal(err)
	}
	bare, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: opSeed, Stream: "RXC_CMD", ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		b.Fatal(err)
	}
	ctlPub, _, err := bare.NewAccountKey()
	if err != nil {
		b.Fatal(err)
	}
	signer, err := jwtauthority.New(jwtauthority.Config{
		OperatorSeed: opSeed, Stream: "RXC_CMD", ControlAccount: ctlPub,
		ControlJetStream: jwtauthority.Limits{DiskStorage: 1 << 30, MemoryStorage: 1 << 20, Streams: 4, Consumers: -1},
	})
	if err != nil {
		b.Fatal(err)
	}
	store, err := provisionmem.New(provisionmem.Config{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := provisioning.New(provisioning.Config{Store: store, Signer: signer, Claims: signer, Pusher: noNATS{}, Consumers: noNATS{}, Stream: "RXC_CMD"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range tenants {
		if _, _, err := svc.EnsureTenantAccount(ctx, fmt.Sprintf("t%d", i), ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		resigned, err := svc.RefreshAccounts(ctx)
		if err != nil || len(resigned) != 0 {
			b.Fatalf("RefreshAccounts = %d re-signed, %v; want none", len(resigned), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*tenants), "µs/account")
}
