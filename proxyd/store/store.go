// Package store owns proxyd's state database: OAuth tokens, client
// registrations, refresh state, replicas and activity records. Two engines
// hold it: an embedded SQLite file (the default) and a shared PostgreSQL
// database for replicas. Both run the same versioned migrations, and the
// stores above this package write their SQL once: DB rewrites placeholders
// for the engine and hides what else differs behind the engine interface.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Errors Open returns, wrapped in an *OpenError that names the database and the fix.
var (
	// ErrNotDatabase means the file exists but is not an SQLite database.
	ErrNotDatabase = errors.New("file is not an SQLite database")
	// ErrSchemaTooNew means a newer mcpx wrote the database.
	ErrSchemaTooNew = errors.New("database schema is newer than this mcpx")
)

// OpenError explains why the state database could not be opened and what to do.
type OpenError struct {
	Path string // the file, or the DSN without its password
	Fix  string
	Err  error
}

func (e *OpenError) Error() string {
	msg := fmt.Sprintf("state database %s: %v", e.Path, e.Err)
	if e.Fix != "" {
		msg += " (" + e.Fix + ")"
	}
	return msg
}

func (e *OpenError) Unwrap() error { return e.Err }

// Engine names.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
)

// engine is what differs between SQLite and PostgreSQL.
type engine interface {
	name() string
	// rebind turns ?-placeholders into the engine's own.
	rebind(q string) string
	// migration is step i's SQL in the engine's dialect.
	migration(i int) string
	// lockSchema serialises migrations across processes: it holds conn
	// until unlock. Migration transactions then run on conn.
	lockSchema(ctx context.Context, conn *sql.Conn) (unlock func(), err error)
	schemaVersion(ctx context.Context, q rowQuerier) (int, error)
	setSchemaVersion(ctx context.Context, tx *sql.Tx, v int) error
	// explain turns an engine error at open into an *OpenError with a fix.
	explain(where string, err error) error
}

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is the state database. Its query methods take ?-placeholders on
// every engine.
type DB struct {
	sql     *sql.DB
	eng     engine
	where   string // file path or DSN without password
	version int
}

// Engine is EngineSQLite or EnginePostgres.
func (d *DB) Engine() string { return d.eng.name() }

// Path is where the database is: the SQLite file, or the PostgreSQL DSN
// without its password.
func (d *DB) Path() string { return d.where }

// SchemaVersion is the schema version after migration.
func (d *DB) SchemaVersion() int { return d.version }

// SQL is the underlying handle, for what this package does not wrap
// (statistics, engine-specific test set-up). Its queries are not rebound.
func (d *DB) SQL() *sql.DB { return d.sql }

// Close closes the database.
func (d *DB) Close() error {
	if err := d.sql.Close(); err != nil {
		return fmt.Errorf("close state database %s: %w", d.where, err)
	}
	return nil
}

// ExecContext runs a statement.
func (d *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.sql.ExecContext(ctx, d.eng.rebind(q), args...)
}

// QueryContext runs a query.
func (d *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.sql.QueryContext(ctx, d.eng.rebind(q), args...)
}

// QueryRowContext runs a query expected to return at most one row.
func (d *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.sql.QueryRowContext(ctx, d.eng.rebind(q), args...)
}

// PrepareContext prepares a statement for repeated use (in a transaction
// with Tx.Stmt).
func (d *DB) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return d.sql.PrepareContext(ctx, d.eng.rebind(q))
}

// BeginTx starts a transaction. On SQLite it takes the write lock at once
// (immediate), so a read-modify-write never interleaves with another
// process's.
func (d *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := d.sql.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{tx: tx, eng: d.eng}, nil
}

// Tx is a transaction of DB, with the same placeholder rewriting.
type Tx struct {
	tx  *sql.Tx
	eng engine
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.eng.rebind(q), args...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.eng.rebind(q), args...)
}

// QueryRowContext runs a one-row query in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.eng.rebind(q), args...)
}

// PrepareContext prepares a statement in the transaction.
func (t *Tx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, t.eng.rebind(q))
}

// Stmt is a statement prepared with DB.PrepareContext, run in the
// transaction.
func (t *Tx) Stmt(ctx context.Context, s *sql.Stmt) *sql.Stmt { return t.tx.StmtContext(ctx, s) }

// Commit commits the transaction.
func (t *Tx) Commit() error { return t.tx.Commit() }

// Rollback aborts the transaction; after Commit it does nothing.
func (t *Tx) Rollback() error { return t.tx.Rollback() }

// Engine is the engine of the transaction's database.
func (t *Tx) Engine() string { return t.eng.name() }

// LockSpace separates the kinds of per-key locks Tx.Lock takes.
type LockSpace int32

// Lock spaces.
const (
	// LockRow guards a read-modify-write of one server's OAuth rows.
	LockRow LockSpace = 1
	// LockGrant is held by the one refresh of a grant across processes.
	LockGrant LockSpace = 2
)

// Lock serialises transactions on (space, key) across processes until the
// transaction ends. On SQLite the immediate transaction already holds the
// database's write lock, so it does nothing; on PostgreSQL it takes a
// transaction-level advisory lock, released at commit, at rollback, or
// when the holder's connection dies.
func (t *Tx) Lock(ctx context.Context, space LockSpace, key string) error {
	if t.eng.name() != EnginePostgres {
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(space), key); err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	return nil
}

// ProcessAlive reports whether process pid exists on this host (a lease
// or replica row of a dead process can be taken over at once).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A killed process nobody has reaped yet (a zombie) still answers
	// signal 0; where /proc shows its state, it is dead.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		switch b[i+2] {
		case 'Z', 'X', 'x':
			return false
		}
	}
	return true
}
