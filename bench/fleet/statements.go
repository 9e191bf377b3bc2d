package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/internal/pgtest"
)

// pgStatements counts the statements PostgreSQL runs during a phase
// (-pg-statements): the cluster is restarted with pg_stat_statements loaded,
// and the first enrolment chunk's statements are listed per enrolment.
type pgStatements struct {
	dsn string
}

// enableStatements loads pg_stat_statements into the throwaway cluster.
func enableStatements(pg *pgtest.Cluster) (*pgStatements, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pg.DSN("postgres")
	if err := execAll(ctx, dsn,
		`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`); err != nil {
		return nil, err
	}
	if err := pg.Halt(); err != nil {
		return nil, err
	}
	if err := pg.Resume(); err != nil {
		return nil, err
	}
	if err := execAll(ctx, dsn, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, err
	}
	return &pgStatements{dsn: dsn}, nil
}

func execAll(ctx context.Context, dsn string, sqls ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range sqls {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func (p *pgStatements) reset() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return execAll(ctx, p.dsn, `SELECT pg_stat_statements_reset()`)
}

// report lists every statement run since reset with its calls per
// operation (n operations, each called per), leaving out the query that
// reads them.
func (p *pgStatements) report(n int, per string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT d.datname, s.calls, s.total_exec_time, s.shared_blks_hit + s.shared_blks_read, s.query
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE s.query NOT LIKE '%pg_stat_statements%'
		ORDER BY d.datname, s.calls DESC, s.query`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "| database | calls per %[1]s | execution ms per %[1]s | buffers per call | statement |\n|---|---|---|---|---|\n", per)
	var calls int64
	var total float64
	for rows.Next() {
		var (
			db      string
			c, blks int64
			ms      float64
			query   string
		)
		if err := rows.Scan(&db, &c, &ms, &blks, &query); err != nil {
			return "", err
		}
		calls += c
		total += ms
		q := strings.Join(strings.Fields(query), " ")
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.3f | %.0f | `%s` |\n", db, float64(c)/float64(n), ms/float64(n), float64(blks)/float64(max(c, 1)), strings.ReplaceAll(q, "|", "\\|"))
	}
	fmt.Fprintf(&b, "| all | %.2f | %.3f | | |\n", float64(calls)/float64(n), total/float64(n))
	if err := rows.Err(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// maintenance lists, for every database of the cluster, the tables
// autovacuum has vacuumed or analysed so far: work PostgreSQL does beside
// the statements, on the same cores.
func (p *pgStatements) maintenance() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var dbs []string
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate`)
	if err != nil {
		return "", err
	}
	if dbs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| database | table | live rows | dead rows | autovacuums | autoanalyses |\n|---|---|---|---|---|---|\n")
	for _, db := range dbs {
		cfg, err := pgx.ParseConfig(p.dsn)
		if err != nil {
			return "", err
		}
		cfg.Database = db
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return "", err
		}
		rows, err := c.Query(ctx, `SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
			FROM pg_stat_user_tables WHERE autovacuum_count + autoanalyze_count > 0 ORDER BY relname`)
		if err == nil {
			for rows.Next() {
				var name string
				var live, dead, vac, an int64
				if err = rows.Scan(&name, &live, &dead, &vac, &an); err != nil {
					break
				}
				fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d |\n", db, name, live, dead, vac, an)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		c.Close(ctx)
		if err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// stmts is set when -pg-statements asked for the statement list.
var stmts *pgStatements
