package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state dir%20", "mcpx")
	path := filepath.Join(dir, "mcpx.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO activity (ts, server, tool, status) VALUES (1, 's', 't', 'ok')`); err != nil {
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
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk int
	if err := db.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
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
				if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
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

// A database written at version 1 keeps its rows through every later step.
func TestMigrateFromVersion1KeepsRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpx.db")
	old, err := open(path, 1)
	if err != nil {
		t.Fatalf("open at v1: %v", err)
	}
	if old.SchemaVersion() != 1 {
		t.Fatalf("version = %d, want 1", old.SchemaVersion())
	}
	if _, err := old.Exec(`INSERT INTO activity (ts, server, tool, duration_us, status, error) VALUES
		(1000, 'docs', 'search', 1500, 'ok', ''), (2000, 'docs', 'fetch', 20, 'error', 'boom')`); err != nil {
		t.Fatalf("insert v1 rows: %v", err)
	}
	old.Close()

	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if db.SchemaVersion() != LatestVersion {
		t.Fatalf("version = %d, want %d", db.SchemaVersion(), LatestVersion)
	}
	rows, err := db.Query(`SELECT tool, status, error, error_class, fault_domain, upstream_http_status FROM activity ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var tool, status, msg, class, domain string
		var code int
		if err := rows.Scan(&tool, &status, &msg, &class, &domain, &code); err != nil {
			t.Fatal(err)
		}
		got = append(got, tool+"/"+status+"/"+msg+"/"+class+"/"+domain)
	}
	want := []string{"search/ok///", "fetch/error/boom//"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if _, err := db.Exec(`INSERT INTO oauth_tokens (server_key, server_name, access_token, updated) VALUES ('k', 'n', 'a', 1)`); err != nil {
		t.Errorf("v3 table missing: %v", err)
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpx.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(path)
			if err == nil {
				err = db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pragma_table_info('activity') WHERE name = 'error_class'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("error_class columns = %d, %v", n, err)
	}
}
