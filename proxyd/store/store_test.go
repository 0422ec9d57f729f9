package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpx-dev/mcpx/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var ctx = context.Background()

var engines = []string{EngineSQLite, EnginePostgres}

// location is where a new database of engine lives (proxyd/store/storetest
// does this for other packages).
func location(t *testing.T, engine string) string {
	if engine == EnginePostgres {
		return pgtest.Database(t)
	}
	return filepath.Join(t.TempDir(), "state.db")
}

func openAt(t *testing.T, engine, loc string) *DB {
	t.Helper()
	db, err := openAtVersion(t, engine, loc, LatestVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openAtVersion opens the database at loc of engine migrated to version v.
func openAtVersion(t *testing.T, engine, loc string, v int) (*DB, error) {
	t.Helper()
	if engine == EnginePostgres {
		return openPostgres(ctx, loc, v)
	}
	return openSQLite(loc, v)
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state dir%20", "mcpx")
	path := filepath.Join(dir, "mcpx.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO activity (ts, server, tool, status) VALUES (1, 's', 't', 'ok')`); err != nil {
		t.Fatalf("insert: %v", err)
	}

	tests := []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o700},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
	}
	for _, tt := range tests {
		st, err := os.Stat(tt.path)
		if err != nil {
			t.Fatalf("stat %s: %v", tt.path, err)
		}
		if got := st.Mode().Perm(); got != tt.mode {
			t.Errorf("%s mode = %o, want %o", filepath.Base(tt.path), got, tt.mode)
		}
	}

	var mode string
	if err := db.SQL().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := db.SQL().QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if got := db.SchemaVersion(); got != LatestVersion {
		t.Errorf("SchemaVersion = %d, want %d", got, LatestVersion)
	}
}

func TestOpenTightensLooseMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpx.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %o, want 600", st.Mode().Perm())
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    error
		inMsg   string
	}{
		{
			name: "not a database",
			prepare: func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte(strings.Repeat("this is a text file, not sqlite\n", 200)), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want:  ErrNotDatabase,
			inMsg: "move the file aside",
		},
		{
			name: "newer schema",
			prepare: func(t *testing.T, path string) {
				db, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "PRAGMA user_version = 99"); err != nil {
					t.Fatal(err)
				}
				db.Close()
			},
			want:  ErrSchemaTooNew,
			inMsg: "upgrade mcpx",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcpx.db")
			tt.prepare(t, path)
			db, err := Open(path)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			var oe *OpenError
			if !errors.As(err, &oe) || oe.Path != path {
				t.Errorf("error %v does not name the path %s", err, path)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.inMsg) {
				t.Errorf("message %q lacks path or %q", err.Error(), tt.inMsg)
			}
		})
	}
}

// A database written at version 1 keeps its rows through every later step,
// on both engines.
func TestMigrateFromVersion1KeepsRows(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) {
			loc := location(t, eng)
			old, err := openAtVersion(t, eng, loc, 1)
			if err != nil {
				t.Fatalf("open at v1: %v", err)
			}
			if old.SchemaVersion() != 1 {
				t.Fatalf("version = %d, want 1", old.SchemaVersion())
			}
			if _, err := old.ExecContext(ctx, `INSERT INTO activity (ts, server, tool, duration_us, status, error) VALUES
				(1000, 'docs', 'search', 1500, 'ok', ''), (2000, 'docs', 'fetch', 20, 'error', 'boom')`); err != nil {
				t.Fatalf("insert v1 rows: %v", err)
			}
			old.Close()

			db := openAt(t, eng, loc)
			if db.SchemaVersion() != LatestVersion {
				t.Fatalf("version = %d, want %d", db.SchemaVersion(), LatestVersion)
			}
			rows, err := db.QueryContext(ctx, `SELECT tool, status, error, error_class, fault_domain, upstream_http_status, replica FROM activity ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var tool, status, msg, class, domain, replica string
				var code int
				if err := rows.Scan(&tool, &status, &msg, &class, &domain, &code, &replica); err != nil {
					t.Fatal(err)
				}
				got = append(got, tool+"/"+status+"/"+msg+"/"+class+"/"+domain+"/"+replica)
			}
			want := []string{"search/ok////", "fetch/error/boom///"}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("rows = %v, want %v", got, want)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO oauth_tokens (server_key, server_name, access_token, updated) VALUES ('k', 'n', 'a', 1)`); err != nil {
				t.Errorf("v3 table missing: %v", err)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO oauth_leases (server_key, holder, expires) VALUES ('k', 'h', 1)`); err != nil {
				t.Errorf("v4 table missing: %v", err)
			}
		})
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng, func(t *testing.T) {
			loc := location(t, eng)
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Go(func() {
					db, err := openAtVersion(t, eng, loc, LatestVersion)
					if err == nil {
						err = db.Close()
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("open %d: %v", i, err)
				}
			}
			db := openAt(t, eng, loc)
			if db.SchemaVersion() != LatestVersion {
				t.Errorf("version %d, want %d", db.SchemaVersion(), LatestVersion)
			}
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM activity WHERE error_class = '' AND replica = ''`).Scan(&n); err != nil {
				t.Errorf("columns of later steps: %v", err)
			}
		})
	}
}

// SQLite answers a switch to WAL that meets another connection's write
// lock with SQLITE_BUSY at once, busy timeout or not (processes starting
// together on a new state file meet it now and then); Open waits it out.
func TestOpenWaitsOutAWriterOnSwitchToWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"CREATE TABLE other (x)", "BEGIN IMMEDIATE", "INSERT INTO other VALUES (1)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var committed bool
	walBusy = func() {
		if !committed {
			committed = true
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { walBusy = func() {} })
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open while another connection writes: %v", err)
	}
	defer db.Close()
	if !committed {
		t.Fatal("Open never met the other connection's lock; the test shows nothing")
	}
}

func TestPostgresNewerSchemaRefused(t *testing.T) {
	loc := location(t, EnginePostgres)
	db := openAt(t, EnginePostgres, loc)
	if _, err := db.ExecContext(ctx, `UPDATE mcpx_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	_, err := OpenPostgres(ctx, loc)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade mcpx") {
		t.Fatalf("error %v, want %v with a fix", err, ErrSchemaTooNew)
	}
}

// Connection failures name the database without its password and say
// what to check.
func TestPostgresOpenErrors(t *testing.T) {
	c := pgtest.Get(t)
	const canary = "pw-canary-4711"
	tests := []struct {
		name, dsn, inMsg string
	}{
		{"no such database", "postgres://mcpx:" + canary + "@/nosuchdb?host=" + c.SocketDir(), "database does not exist"},
		{"nothing listening", "postgres://mcpx:" + canary + "@/x?host=" + t.TempDir() + "&connect_timeout=2", "cannot connect"},
		{"not a DSN", "postgres://mcpx:" + canary + "@host:notaport/db", "not a valid PostgreSQL connection string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := OpenPostgres(ctx, tt.dsn)
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			var oe *OpenError
			if !errors.As(err, &oe) || oe.Fix == "" {
				t.Errorf("error %v has no fix", err)
			}
			if !strings.Contains(err.Error(), tt.inMsg) {
				t.Errorf("error %q lacks %q", err, tt.inMsg)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("error prints the password: %q", err)
			}
		})
	}
}

func TestRebindDollar(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"SELECT a FROM t WHERE k = ? AND v IN (?,?)", "SELECT a FROM t WHERE k = $1 AND v IN ($2,$3)"},
		{"SELECT '?', \"q?\" FROM t WHERE x = ?", "SELECT '?', \"q?\" FROM t WHERE x = $1"},
		{"VALUES (?,?,?,?,?,?,?,?,?,?,?)", "VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)"},
	}
	for _, tt := range tests {
		if got := rebindDollar(tt.in); got != tt.want {
			t.Errorf("rebindDollar(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:secret@db.example:5433/state?sslmode=require&password=x", "postgres://u@db.example:5433/state"},
		{"host=/run/pg user=u password=secret dbname=s", "postgres://u@/s?host=/run/pg"},
		{"postgres://u:secret@[::1", "postgres://[unparseable DSN]"},
	}
	for _, tt := range tests {
		if got := RedactDSN(tt.in); got != tt.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
