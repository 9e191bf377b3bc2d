package serveradmin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The upgrade from a work-queue or interest command stream (the shape
// deploy/ shipped before: R3 stream, R3 consumers) to limits retention.
// nats-server cannot change a stream's retention, and sensors' permissions
// name the stream, so the stream is replaced under the same name with its
// pending commands carried over by nats-server itself (stream sourcing;
// the CONTROL administrator may only call the JetStream API):
//
//  1. the sensors' consumers of the old stream are deleted (a work-queue
//     stream allows no consumer overlapping another's filter; the repair
//     pass creates them again on the new stream);
//  2. a holding stream <name>_UPGRADE sources every command of the old one;
//  3. the old stream stops taking commands (its subjects move to one no
//     one publishes on: a command published now is refused, answered 503
//     by the control plane, never stored and lost);
//  4. once the holding stream has every command, the old stream is
//     deleted and the new one created, sourcing the holding stream;
//  5. once the new stream has every command, it stops sourcing and the
//     holding stream is deleted.
//
// Each step is idempotent and the state is read from the streams, so a
// provisioner that stops in the middle carries on at its next start. A
// command the old consumer had delivered but that was not acknowledged is
// delivered again by the new consumer (the agent does not apply it twice);
// acknowledged commands of a work-queue stream are gone and stay gone.

// holdingSuffix names the holding stream.
const holdingSuffix = "_UPGRADE"

// upgradeWait bounds how long a step waits for nats-server to copy.
const upgradeWait = 2 * time.Minute

// upgradeStream carries a work-queue or interest stream over to limits
// retention, or finishes an upgrade that stopped half-way. It reports
// whether it did anything; the caller then brings the stream up to the
// configuration as usual.
func (c *Client) upgradeStream(ctx context.Context, want jetstream.StreamConfig) (bool, error) {
	if want.Retention != jetstream.LimitsPolicy {
		return false, nil
	}
	// One upgrade at a time in this process (the connect hook and a
	// consumer's missing stream both ensure the stream).
	c.upgradeMu.Lock()
	defer c.upgradeMu.Unlock()
	name, hold := want.Name, want.Name+holdingSuffix
	var did bool
	err := c.jetStream(ctx, func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.Stream(ctx, hold)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err := js.Stream(ctx, name)
			if err != nil || st.CachedInfo().Config.Retention == jetstream.LimitsPolicy {
				return nil // nothing to upgrade (a missing stream is created as usual)
			}
		} else if err != nil {
			return err
		}
		did = true
		return nil
	})
	if err != nil || !did {
		return false, err
	}
	c.log.Warn("upgrading the command stream to limits retention (pending commands are carried over; commands published meanwhile are refused)", "stream", name)
	steps := []struct {
		what string
		fn   func(ctx context.Context, js jetstream.JetStream) error
	}{
		{"hold the old stream's commands", func(ctx context.Context, js jetstream.JetStream) error {
			old, err := js.Stream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil // already replaced
			}
			if err != nil {
				return err
			}
			if old.CachedInfo().Config.Retention == jetstream.LimitsPolicy {
				return nil // the new stream: step 4 ran
			}
			if err := deleteConsumers(ctx, old); err != nil {
				return err
			}
			cfg := old.CachedInfo().Config
			if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name: hold, Description: "RXC sensor commands carried over to a new " + name,
				Retention: jetstream.LimitsPolicy, Storage: cfg.Storage, Replicas: cfg.Replicas,
				Sources: []*jetstream.StreamSource{{Name: name}},
			}); err != nil {
				return fmt.Errorf("holding stream: %w", err)
			}
			closed := cfg
			closed.Subjects = []string{"rxc-upgrading." + name}
			if _, err := js.UpdateStream(ctx, closed); err != nil {
				return fmt.Errorf("close the old stream: %w", err)
			}
			if err := caughtUp(ctx, js, hold, name); err != nil {
				return err
			}
			if err := stopSourcing(ctx, js, hold); err != nil {
				return err
			}
			if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("delete the old stream: %w", err)
			}
			return nil
		}},
		{"create the new stream from the held commands", func(ctx context.Context, js jetstream.JetStream) error {
			// Closed to publishers until it holds every carried command, so
			// that its count tells when the copy is complete.
			with := want
			with.Sources = []*jetstream.StreamSource{{Name: hold}}
			with.Subjects = []string{"rxc-upgrading." + name}
			if st, err := js.Stream(ctx, name); err == nil && len(st.CachedInfo().Config.Sources) == 0 {
				// Step 5 ran up to the holding stream's deletion.
				return nil
			}
			// The holding stream must not source the stream it feeds (a
			// stop after step 1's copy and before its stopSourcing).
			if err := stopSourcing(ctx, js, hold); err != nil {
				return err
			}
			if _, err := js.CreateOrUpdateStream(ctx, with); err != nil {
				return fmt.Errorf("new stream: %w", err)
			}
			if err := caughtUp(ctx, js, name, hold); err != nil {
				return err
			}
			if _, err := js.UpdateStream(ctx, want); err != nil {
				return fmt.Errorf("stop sourcing: %w", err)
			}
			return nil
		}},
		{"delete the holding stream", func(ctx context.Context, js jetstream.JetStream) error {
			if err := js.DeleteStream(ctx, hold); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := c.callWithin(ctx, adminConn, upgradeWait+c.cfg.RequestTimeout, func(ctx context.Context, nc *nats.Conn) error {
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			return s.fn(ctx, js)
		}); err != nil {
			return true, fmt.Errorf("serveradmin: upgrade stream %s: %s: %w", name, s.what, err)
		}
	}
	c.log.Warn("upgraded the command stream to limits retention; the repair pass creates every sensor's consumer again", "stream", name)
	return true, nil
}

// stopSourcing removes the sources of the holding stream.
func stopSourcing(ctx context.Context, js jetstream.JetStream, hold string) error {
	st, err := js.Stream(ctx, hold)
	if err != nil {
		return fmt.Errorf("holding stream: %w", err)
	}
	cfg := st.CachedInfo().Config
	if len(cfg.Sources) == 0 {
		return nil
	}
	cfg.Sources = nil
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("holding stream: stop sourcing: %w", err)
	}
	return nil
}

// deleteConsumers deletes the sensors' consumers of a stream.
func deleteConsumers(ctx context.Context, st jetstream.Stream) error {
	lister := st.ConsumerNames(ctx)
	var names []string
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list consumers: %w", err)
	}
	for _, n := range names {
		if err := st.DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("delete consumer %s: %w", n, err)
		}
	}
	return nil
}

// caughtUp waits until stream to has sourced everything stream from holds:
// the source reports no lag and to holds at least as many messages as from
// (a work-queue origin may drop what it delivered; then it holds none).
// Neither stream takes publications meanwhile.
func caughtUp(ctx context.Context, js jetstream.JetStream, to, from string) error {
	for {
		dst, err := js.Stream(ctx, to)
		if err != nil {
			return err
		}
		src, err := js.Stream(ctx, from)
		if err != nil {
			return err
		}
		info, want := dst.CachedInfo(), src.CachedInfo().State.Msgs
		for _, si := range info.Sources {
			if si.Name == from && si.Lag == 0 && info.State.Msgs >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s has not copied %s: %w", to, from, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
