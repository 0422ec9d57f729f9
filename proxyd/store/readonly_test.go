package store_test

import (
	"context"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

// TestReadOnly: the read-only opening sees what was committed and refuses
// every write, on both engines.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	for _, eng := range storetest.Engines {
		t.Run(eng, func(t *testing.T) {
			loc := storetest.Location(t, eng)
			rw := storetest.OpenAt(t, eng, loc)
			if _, err := rw.ExecContext(ctx, `INSERT INTO activity (ts, server, tool, status) VALUES (?, 'a', 'b', 'ok')`, int64(1)); err != nil {
				t.Fatal(err)
			}
			var ro *store.DB
			var err error
			if eng == store.EnginePostgres {
				ro, err = store.OpenPostgresReadOnly(ctx, loc)
			} else {
				ro, err = store.OpenSQLiteReadOnly(ctx, loc)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			var n int
			if err := ro.QueryRowContext(ctx, `SELECT count(*) FROM activity`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("read-only count = %d, %v; want 1", n, err)
			}
			if _, err := ro.ExecContext(ctx, `DELETE FROM activity`); err == nil {
				t.Fatal("a write through the read-only opening succeeded")
			}
		})
	}
	if _, err := store.OpenSQLiteReadOnly(ctx, t.TempDir()+"/none.db"); err == nil {
		t.Error("opening a missing SQLite file read-only succeeded")
	}
}
