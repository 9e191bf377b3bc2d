package natstest_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/internal/natstest"
)

// BenchmarkStopWithConsumers measures how long nats-server takes to stop
// (SIGTERM, or Shutdown in process) and to start again with
// RXC_STOP_CONSUMERS (default 3,000) durable consumers on one file-backed
// stream, each holding one message, as the command stream holds one per
// sensor, in process. The shipped manifests' grace periods come from
// bench/stop, which runs nats-server releases as processes, at 10,000
// consumers, with lame-duck mode too (docs/operations.md). Run once:
// -bench StopWithConsumers -benchtime 1x.
func BenchmarkStopWithConsumers(b *testing.B) {
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("RXC_STOP_CONSUMERS")); err == nil && v > 0 {
		n = v
	}
	retention := jetstream.WorkQueuePolicy
	if os.Getenv("RXC_STOP_RETENTION") == "limits" {
		retention = jetstream.LimitsPolicy
	}
	for range b.N {
		srv := natstest.Start(b, natstest.Options{Dir: b.TempDir()})
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CMD", Subjects: []string{"cmd.>"}, Retention: retention, Storage: jetstream.FileStorage, MaxConsumers: n + 1})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			subj := fmt.Sprintf("cmd.t.s%d", i)
			if _, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("c%d", i), FilterSubject: subj, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				b.Fatal(err)
			}
			if _, err := js.Publish(ctx, subj, []byte("x")); err != nil {
				b.Fatal(err)
			}
		}
		nc.Close()
		start := time.Now()
		srv.Stop()
		stop := time.Since(start)
		start = time.Now()
		srv.Start()
		restart := time.Since(start)
		start = time.Now()
		srv.Stop()
		b.ReportMetric(stop.Seconds(), "s/stop")
		b.ReportMetric(restart.Seconds(), "s/start")
		b.ReportMetric(time.Since(start).Seconds(), "s/stop-after-restart")
	}
}
