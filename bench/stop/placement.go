package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rxc-project/rxc/bench/benchenv"
)

// placement (-placement D) answers where nats-server puts a new R1
// consumer of the shipped shape (limits R3 stream) while one of the
// stream's three nodes is dead (SIGKILL, as in TestClusterNodeLoss): for D
// after the kill it creates one consumer every second, as the provisioner
// recreates a lost sensor's consumer, and reports per 15 s window how many
// answered from a live node and how many got no answer within 3 s (placed
// on the dead node: nobody leads them). docs/operations.md ("nats-server
// 2.11") cites it.
func placement(ctx context.Context, bin string, d time.Duration) (string, error) {
	t := &benchenv.T{}
	defer t.Close()
	nodes, err := startNodes(t, bin, 3, "")
	if err != nil {
		return "", err
	}
	version, _ := nodes[0].Version()
	nc, err := nats.Connect(nodes[0].URL()+","+nodes[1].URL(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	scfg := jetstream.StreamConfig{
		Name: stream, Subjects: []string{"rxc.*.*.cmd"}, Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: 64,
		Storage: jetstream.FileStorage, Replicas: 3, MaxAge: 168 * time.Hour, Duplicates: 2 * time.Minute, MaxConsumers: 1000000,
	}
	if err := retry(ctx, 60*time.Second, func() error { _, err := js.CreateStream(ctx, scfg); return err }); err != nil {
		return "", fmt.Errorf("stream: %w", err)
	}
	// The stream on all three nodes before the loss.
	if err := retry(ctx, 60*time.Second, func() error {
		info, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		if ci := info.CachedInfo().Cluster; ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return fmt.Errorf("stream not yet on three nodes")
		}
		return nil
	}); err != nil {
		return "", err
	}
	nodes[2].Kill()
	dead := "nats-3"
	killed := time.Now()
	type window struct{ live, none, other int }
	const step = 15 * time.Second
	windows := make([]window, int(d/step)+1)
	for i := 0; time.Since(killed) < d; i++ {
		at := time.Since(killed)
		w := &windows[int(at/step)]
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := js.CreateOrUpdateConsumer(cctx, stream, consumerConfig(sensor(i), 1))
		cancel()
		switch {
		case err == nil && c.CachedInfo().Cluster != nil && c.CachedInfo().Cluster.Leader != dead:
			w.live++
		case err != nil && strings.Contains(err.Error(), "deadline"):
			w.none++
		default:
			w.other++
			fmt.Fprintf(os.Stderr, "consumer %d: %v\n", i, err)
		}
		time.Sleep(time.Until(killed.Add(at + time.Second)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nats-server %s, three nodes, limits R3 stream, one node killed (SIGKILL); one new R1 consumer a second after the kill (a 3 s answer timeout):\n\n", version)
	b.WriteString("| seconds after the kill | answered from a live node | no answer (placed on the dead node) | other errors |\n|---|---|---|---|\n")
	for i, w := range windows {
		if w.live+w.none+w.other == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %d–%d | %d | %d | %d |\n", i*int(step/time.Second), (i+1)*int(step/time.Second), w.live, w.none, w.other)
	}
	return b.String(), nil
}
