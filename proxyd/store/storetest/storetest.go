// Package storetest runs tests against every state engine: a fresh SQLite
// file and a fresh database on the test binary's private PostgreSQL
// cluster (see internal/pgtest; the package's TestMain must use
// pgtest.Main).
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// Engines are the engines Each runs against.
var Engines = []string{store.EngineSQLite, store.EnginePostgres}

// Each runs fn as one subtest per engine, each with a new database.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	for _, eng := range Engines {
		t.Run(eng, func(t *testing.T) { fn(t, Open(t, eng)) })
	}
}

// Location is where a new database of engine lives: an SQLite file path
// or a PostgreSQL DSN. Open it (as often as wanted) with OpenAt.
func Location(tb testing.TB, engine string) string {
	tb.Helper()
	if engine == store.EnginePostgres {
		return pgtest.Database(tb)
	}
	return filepath.Join(tb.TempDir(), "state.db")
}

// OpenAt opens the database at loc, closing it when the test ends.
func OpenAt(tb testing.TB, engine, loc string) *store.DB {
	tb.Helper()
	var db *store.DB
	var err error
	if engine == store.EnginePostgres {
		db, err = store.OpenPostgres(context.Background(), loc)
	} else {
		db, err = store.Open(loc)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// Open opens a new database of engine.
func Open(tb testing.TB, engine string) *store.DB {
	tb.Helper()
	return OpenAt(tb, engine, Location(tb, engine))
}
