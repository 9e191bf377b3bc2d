package migrate_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/postgres/pgstoretest"
	"github.com/rxc-project/rxc/internal/pgtest"
	"github.com/rxc-project/rxc/migrations"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func file(sql string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(sql)} }

func TestList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []migrate.File
		wantErr string
	}{
		{
			name: "numeric order, not lexical",
			files: fstest.MapFS{
				"10_ten.sql": file(""), "002_two.sql": file(""), "001_one.sql": file(""),
				"README.md": file(""), "sub/003_nested.sql": file(""),
			},
			want: []migrate.File{{Version: 1, Name: "001_one.sql"}, {Version: 2, Name: "002_two.sql"}, {Version: 10, Name: "10_ten.sql"}},
		},
		{name: "empty", files: fstest.MapFS{}, want: nil},
		{name: "no number", files: fstest.MapFS{"init.sql": file("")}, wantErr: `"init.sql" is not named NNN_name.sql`},
		{name: "no name", files: fstest.MapFS{"001_.sql": file("")}, wantErr: "is not named NNN_name.sql"},
		{name: "letters in version", files: fstest.MapFS{"00a_x.sql": file("")}, wantErr: "is not named NNN_name.sql"},
		{name: "version zero", files: fstest.MapFS{"000_x.sql": file("")}, wantErr: "positive"},
		{name: "duplicate version", files: fstest.MapFS{"001_a.sql": file(""), "1_b.sql": file("")}, wantErr: "same version 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := migrate.List(tc.files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("List error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("List mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyIsIdempotentAndIncremental(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	files := fstest.MapFS{
		"001_create.sql": file("CREATE TABLE a (id int PRIMARY KEY);\nCREATE TABLE b (id int PRIMARY KEY);"),
		"002_fill.sql":   file("INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);"),
	}
	steps := []struct {
		name  string
		add   map[string]string
		want  []string
		wantA int
	}{
		{name: "first run applies all in order", want: []string{"001_create.sql", "002_fill.sql"}, wantA: 2},
		{name: "second run applies nothing", want: nil, wantA: 2},
		{name: "new file is applied alone", add: map[string]string{"003_more.sql": "INSERT INTO a VALUES (3);"}, want: []string{"003_more.sql"}, wantA: 3},
	}
	for _, st := range steps {
		for n, sql := range st.add {
			files[n] = file(sql)
		}
		got, err := migrate.Apply(ctx(t), pool, "svc", files)
		if err != nil {
			t.Fatalf("%s: Apply: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: applied mismatch (-want +got):\n%s", st.name, diff)
		}
		if n := pgstoretest.Value[int](ctx(t), t, pool, "SELECT count(*) FROM a"); n != st.wantA {
			t.Errorf("%s: table a has %d rows, want %d (a file ran twice or not at all)", st.name, n, st.wantA)
		}
	}
	recorded := pgstoretest.Column[string](ctx(t), t, pool, "SELECT component || ':' || version || ':' || name FROM schema_migrations ORDER BY version")
	want := []string{"svc:1:001_create.sql", "svc:2:002_fill.sql", "svc:3:003_more.sql"}
	if diff := cmp.Diff(want, recorded); diff != "" {
		t.Errorf("schema_migrations mismatch (-want +got):\n%s", diff)
	}
}

func TestApplyComponentsAreIndependent(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	one := fstest.MapFS{"001_one.sql": file("CREATE TABLE one (id int);")}
	two := fstest.MapFS{"001_two.sql": file("CREATE TABLE two (id int);")}
	for _, c := range []struct {
		component string
		files     fstest.MapFS
		want      []string
	}{
		{"one", one, []string{"001_one.sql"}},
		{"two", two, []string{"001_two.sql"}},
		{"one", one, nil},
	} {
		got, err := migrate.Apply(ctx(t), pool, c.component, c.files)
		if err != nil {
			t.Fatalf("Apply(%s): %v", c.component, err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("Apply(%s) applied mismatch (-want +got):\n%s", c.component, diff)
		}
	}
}

func TestApplyRollsBackAFailingFile(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	files := fstest.MapFS{
		"001_ok.sql":  file("CREATE TABLE ok (id int);"),
		"002_bad.sql": file("CREATE TABLE half (id int); SELECT no_such_function();"),
	}
	got, err := migrate.Apply(ctx(t), pool, "svc", files)
	if err == nil || !strings.Contains(err.Error(), "002_bad.sql") {
		t.Fatalf("Apply error = %v, want one naming 002_bad.sql", err)
	}
	if diff := cmp.Diff([]string{"001_ok.sql"}, got); diff != "" {
		t.Errorf("applied before the failure mismatch (-want +got):\n%s", diff)
	}
	var half bool
	if err := pool.QueryRow(ctx(t), "SELECT to_regclass('half') IS NOT NULL").Scan(&half); err != nil {
		t.Fatal(err)
	}
	if half {
		t.Errorf("table from the failed file exists: its transaction was not rolled back")
	}
	files["002_bad.sql"] = file("CREATE TABLE half (id int);")
	got, err = migrate.Apply(ctx(t), pool, "svc", files)
	if err != nil {
		t.Fatalf("Apply after fix: %v", err)
	}
	if diff := cmp.Diff([]string{"002_bad.sql"}, got); diff != "" {
		t.Errorf("applied after fix mismatch (-want +got):\n%s", diff)
	}
}

// Replicas starting together: each file must run exactly once. The files
// fail when run twice (CREATE TABLE without IF NOT EXISTS), so without the
// lock some runner would see an error.
func TestApplyConcurrentRunners(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	files := fstest.MapFS{
		"001_a.sql": file("CREATE TABLE a (id int PRIMARY KEY); SELECT pg_sleep(0.05);"),
		"002_b.sql": file("CREATE TABLE b (id int PRIMARY KEY); INSERT INTO a VALUES (1);"),
		"003_c.sql": file("CREATE TABLE c (id int PRIMARY KEY);"),
	}
	const runners = 6
	pools := make([]*pgxpool.Pool, runners)
	for i := range pools {
		pools[i] = pgtest.Pool(t, dsn)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []string
		start = make(chan struct{})
	)
	errs := make([]error, runners)
	for i := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := migrate.Apply(context.Background(), pools[i], "svc", files)
			errs[i] = err
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("runner %d: %v", i, err)
		}
	}
	slices.Sort(all)
	if diff := cmp.Diff([]string{"001_a.sql", "002_b.sql", "003_c.sql"}, all); diff != "" {
		t.Errorf("files applied across runners (-want +got):\n%s", diff)
	}
}

func TestApplyProvisionerSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, pgtest.DSN(t))
	got, err := migrate.Apply(ctx(t), pool, "provisioner", migrations.Provisioner)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if diff := cmp.Diff([]string{"001_init.sql", "002_consumer_names.sql", "003_bounded_revocations.sql", "004_revocation_generation.sql", "005_consumer_nodes.sql"}, got); diff != "" {
		t.Errorf("applied mismatch (-want +got):\n%s", diff)
	}
	for _, table := range []string{"nats_operator", "nats_accounts", "nats_users", "nats_revocations", "nats_consumer_names"} {
		var ok bool
		if err := pool.QueryRow(ctx(t), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("table %s missing after Apply", table)
		}
	}
}

func TestApplyRequiresComponent(t *testing.T) {
	t.Parallel()
	if _, err := migrate.Apply(context.Background(), nil, "", fstest.MapFS{}); err == nil {
		t.Fatal("Apply with empty component succeeded, want error")
	}
}
