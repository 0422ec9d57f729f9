package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// The record read without the daemon: commands open the state database
// read-only when proxyd is not running (after a crash it is the first
// thing an operator wants). Nothing is migrated or written; SQLite reads
// committed transactions still in the write-ahead log, so what a killed
// daemon committed is seen.

// OpenSQLiteReadOnly opens the SQLite database at path for reading only.
func OpenSQLiteReadOnly(ctx context.Context, path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, &OpenError{Path: path, Err: err, Fix: "proxyd has not kept a record in this state dir yet (check --state-dir)"}
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", busyTimeoutPragma())
	q.Add("_pragma", "query_only(1)")
	sdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, &OpenError{Path: path, Err: err}
	}
	d := &DB{sql: sdb, eng: sqliteEngine{}, where: path}
	if err := d.checkReadable(ctx); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(path, err)
	}
	return d, nil
}

// OpenPostgresReadOnly connects to the PostgreSQL database of dsn with
// read-only transactions.
func OpenPostgresReadOnly(ctx context.Context, dsn string) (*DB, error) {
	where, cfg, err := pgConfig(dsn)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["default_transaction_read_only"] = "on"
	sdb := stdlib.OpenDB(*cfg)
	sdb.SetMaxOpenConns(2)
	d := &DB{sql: sdb, eng: &pgEngine{}, where: where}
	if err := d.checkReadable(ctx); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(where, err)
	}
	return d, nil
}

// checkReadable reads the schema version: this build reads the schema it
// writes, and says what to do about another.
func (d *DB) checkReadable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := d.eng.schemaVersion(ctx, d.sql)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > LatestVersion:
		return &OpenError{Path: d.where, Err: fmt.Errorf("%w (schema %d, this mcpx knows %d)", ErrSchemaTooNew, v, LatestVersion),
			Fix: "read it with the mcpx that wrote it"}
	case v < LatestVersion:
		return &OpenError{Path: d.where, Err: fmt.Errorf("the schema is at version %d, this mcpx reads %d", v, LatestVersion),
			Fix: "start proxyd once ('mcpx up') to migrate it"}
	}
	d.version = v
	return nil
}
