package controlplanestore

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// credentialsChannel is the PostgreSQL notification channel on which every
// committed revocation and certificate replacement is announced to all
// replicas, as "<tenantId>/<sensorId>". The notification is part of the
// transaction that makes the change: it is delivered exactly when the
// change is visible, and never for a change that rolled back.
const credentialsChannel = "rxc_sensor_credentials"

// notifyCredentialsSQL announces a sensor's changed credentials on the
// channel ($1) for the sensor ($2).
const notifyCredentialsSQL = `SELECT pg_notify($1, tenant_id || '/' || id) FROM sensors WHERE id = $2`

// notifyCredentials announces in tx that the sensor's credentials changed.
func notifyCredentials(ctx context.Context, tx pgx.Tx, sensorID string) error {
	_, err := tx.Exec(ctx, notifyCredentialsSQL, credentialsChannel, sensorID)
	return err
}

// ListenCredentialChanges calls changed for every revocation or certificate
// replacement committed by any replica, until ctx ends. It holds a
// connection of its own (LISTEN cannot share a pooled one) and reconnects
// with back-off when it is lost. Notifications sent while it was not
// listening are lost, so resync is called after every (re)connection: the
// caller re-checks everything it holds.
func (s *Store) ListenCredentialChanges(ctx context.Context, log *slog.Logger, changed func(tenantID, sensorID string), resync func()) {
	relisten := backoff.Policy{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	failures := 0
	for first := true; ctx.Err() == nil; first = false {
		err := s.listen(ctx, changed, func() {
			failures = 0
			if !first {
				resync()
			}
		})
		if ctx.Err() != nil {
			return
		}
		wait := relisten.Delay(failures)
		failures++
		log.Warn("credential change listener lost its connection; re-listening", logkey.Error, err, "retry_in", wait.String())
		// While not listening, a revocation elsewhere is missed: re-check
		// what is held now, and again once listening.
		resync()
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

func (s *Store) listen(ctx context.Context, changed func(tenantID, sensorID string), listening func()) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+credentialsChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		tenantID, sensorID, ok := strings.Cut(n.Payload, "/")
		if ok {
			changed(tenantID, sensorID)
		}
	}
}
