package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations is append-only: entry i brings the schema from version i to
// i+1. Never edit or reorder a shipped step; add a new one.
var migrations = []string{
	// 1: activity as first shipped.
	`CREATE TABLE activity (
		id INTEGER PRIMARY KEY,
		ts INTEGER NOT NULL,
		server TEXT NOT NULL,
		tool TEXT NOT NULL,
		duration_us INTEGER NOT NULL DEFAULT 0,
		status TEXT NOT NULL,
		error TEXT NOT NULL DEFAULT ''
	);`,
	// 2: the call-error taxonomy and indexes for the activity filters.
	`ALTER TABLE activity ADD COLUMN error_class TEXT NOT NULL DEFAULT '';
	ALTER TABLE activity ADD COLUMN fault_domain TEXT NOT NULL DEFAULT '';
	ALTER TABLE activity ADD COLUMN upstream_http_status INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE activity ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE activity ADD COLUMN client TEXT NOT NULL DEFAULT '';
	ALTER TABLE activity ADD COLUMN protocol_era TEXT NOT NULL DEFAULT '';
	ALTER TABLE activity ADD COLUMN reinit INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE activity ADD COLUMN retried INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE activity ADD COLUMN token_refresh INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE activity ADD COLUMN reason TEXT NOT NULL DEFAULT '';
	CREATE INDEX activity_ts ON activity (ts);
	CREATE INDEX activity_server_ts ON activity (server, ts);
	CREATE INDEX activity_class_ts ON activity (error_class, ts);
	CREATE INDEX activity_domain_ts ON activity (fault_domain, ts);`,
	// 3: OAuth tokens, client registrations and refresh state.
	`CREATE TABLE oauth_tokens (server_key TEXT PRIMARY KEY, server_name TEXT NOT NULL, access_token TEXT NOT NULL, refresh_token TEXT NOT NULL DEFAULT '', token_type TEXT NOT NULL DEFAULT 'Bearer', expiry INTEGER NOT NULL DEFAULT 0, scopes TEXT NOT NULL DEFAULT '', generation INTEGER NOT NULL DEFAULT 0, updated INTEGER NOT NULL);
	CREATE TABLE oauth_clients (server_key TEXT PRIMARY KEY, client_id TEXT NOT NULL, client_secret TEXT NOT NULL DEFAULT '', registered INTEGER NOT NULL DEFAULT 0, redirect_uri TEXT NOT NULL DEFAULT '', raw TEXT NOT NULL DEFAULT '', updated INTEGER NOT NULL);
	CREATE TABLE oauth_state (server_key TEXT PRIMARY KEY, last_refresh INTEGER NOT NULL DEFAULT 0, last_outcome TEXT NOT NULL DEFAULT '', last_class TEXT NOT NULL DEFAULT '', latched TEXT NOT NULL DEFAULT '', updated INTEGER NOT NULL);`,
}

// LatestVersion is the schema version this build writes.
var LatestVersion = len(migrations)

// migrateTo applies pending steps up to target, each in its own immediate
// transaction that re-reads the version, so two processes opening the same
// file at once apply each step once.
func (d *DB) migrateTo(ctx context.Context, target int) error {
	// A first query surfaces "not a database" before anything else.
	cur, err := userVersion(ctx, d.DB)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if cur > LatestVersion {
		return &OpenError{Path: d.path,
			Err: fmt.Errorf("%w (schema %d, this mcpx knows %d)", ErrSchemaTooNew, cur, LatestVersion),
			Fix: "upgrade mcpx, or point --state-dir at another directory"}
	}
	for cur < target {
		next, err := d.step(ctx, cur)
		if err != nil {
			return err
		}
		cur = next
	}
	d.version = cur
	return nil
}

// step applies the migration after version from, unless another process
// got there first, and returns the version now in the file.
func (d *DB) step(ctx context.Context, from int) (int, error) {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin migration %d: %w", from+1, err)
	}
	defer func() { _ = tx.Rollback() }()
	cur, err := userVersion(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if cur != from {
		return cur, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[from]); err != nil {
		return 0, fmt.Errorf("apply migration %d: %w", from+1, err)
	}
	// user_version lives in the file header and commits with the step.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", from+1)); err != nil {
		return 0, fmt.Errorf("record schema version %d: %w", from+1, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit migration %d: %w", from+1, err)
	}
	return from + 1, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func userVersion(ctx context.Context, q querier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}
