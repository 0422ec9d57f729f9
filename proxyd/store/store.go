// Package store owns proxyd's one SQLite database: OAuth tokens, client
// registrations and activity records. It opens the file with safe
// permissions and settings and brings its schema up to date.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
)

// Errors Open returns, wrapped in an *OpenError that names the path and the fix.
var (
	// ErrNotDatabase means the file exists but is not an SQLite database.
	ErrNotDatabase = errors.New("file is not an SQLite database")
	// ErrSchemaTooNew means a newer mcpx wrote the database.
	ErrSchemaTooNew = errors.New("database schema is newer than this mcpx")
)

// OpenError explains why the state database could not be opened and what to do.
type OpenError struct {
	Path string
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

// DB is the state database.
type DB struct {
	*sql.DB
	path    string
	version int
}

// sqliteNotADB is SQLITE_NOTADB; SQLITE_CORRUPT is reported for some
// damaged headers too.
const (
	sqliteCorrupt = 11
	sqliteNotADB  = 26
)

// Open opens (creating if needed) the database at path: parent directory
// 0700, file 0600, WAL journal, a busy timeout and foreign keys, and runs
// every pending migration.
func Open(path string) (*DB, error) {
	return open(path, LatestVersion)
}

func open(path string, target int) (*DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, &OpenError{Path: path, Err: errors.New("path must not contain '?' or '#'"), Fix: "choose another --state-dir"}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, &OpenError{Path: path, Err: fmt.Errorf("create directory: %w", err)}
	}
	// Create the file ourselves so SQLite never creates it with the umask's
	// mode; SQLite gives -wal and -shm the main file's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &OpenError{Path: path, Err: fmt.Errorf("open file: %w", err)}
	}
	_ = f.Close()
	if err := restrict(path); err != nil {
		return nil, &OpenError{Path: path, Err: err}
	}

	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL in WAL mode: commits do not fsync; a power loss may lose the
	// last transactions but never corrupts the file.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	sdb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, &OpenError{Path: path, Err: err}
	}
	d := &DB{DB: sdb, path: path}
	if err := d.migrateTo(context.Background(), target); err != nil {
		_ = sdb.Close()
		return nil, explain(path, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := restrict(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = sdb.Close()
			return nil, &OpenError{Path: path, Err: err}
		}
	}
	return d, nil
}

// restrict makes a file owner-only if it exists with a wider mode.
func restrict(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(p, 0o600); err != nil {
			return fmt.Errorf("restrict permissions of %s: %w", p, err)
		}
	}
	return nil
}

func explain(path string, err error) error {
	var oe *OpenError
	if errors.As(err, &oe) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteNotADB, sqliteCorrupt:
			return &OpenError{Path: path, Err: fmt.Errorf("%w: %v", ErrNotDatabase, err),
				Fix: "move the file aside or delete it; mcpx creates a new one (stored sign-ins and activity are lost)"}
		}
	}
	return &OpenError{Path: path, Err: err}
}

// Close closes the database.
func (d *DB) Close() error {
	if err := d.DB.Close(); err != nil {
		return fmt.Errorf("close state database %s: %w", d.path, err)
	}
	return nil
}

// Path is the database file's path.
func (d *DB) Path() string { return d.path }

// SchemaVersion is the schema version after migration.
func (d *DB) SchemaVersion() int { return d.version }
