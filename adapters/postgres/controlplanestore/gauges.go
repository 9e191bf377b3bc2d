package controlplanestore

import (
	"context"
	"fmt"
)

// SensorsByState counts sensors per lifecycle state (for the sensors
// gauge; every state appears, zero included).
func (s *Store) SensorsByState(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for _, st := range []string{"pending", "online", "running", "stopped", "error", "offline", "revoked"} {
		out[st] = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM sensors GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count sensors by state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return nil, err
		}
		out[state] = n
	}
	return out, rows.Err()
}

// CommandsByOutcome counts commands per delivery status (pending, accepted,
// failed, expired) and what the sensor reported (applied, refused, or none
// yet).
func (s *Store) CommandsByOutcome(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, coalesce(outcome, 'none'), count(*) FROM commands GROUP BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("count commands by outcome: %w", err)
	}
	defer rows.Close()
	out := map[[2]string]int64{}
	for rows.Next() {
		var status, outcome string
		var n int64
		if err := rows.Scan(&status, &outcome, &n); err != nil {
			return nil, err
		}
		out[[2]string{status, outcome}] = n
	}
	return out, rows.Err()
}
