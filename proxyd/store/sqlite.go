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
	"time"

	"modernc.org/sqlite"
)

// sqliteNotADB is SQLITE_NOTADB; SQLITE_CORRUPT is reported for some
// damaged headers too.
const (
	sqliteBusy    = 5
	sqliteCorrupt = 11
	sqliteNotADB  = 26
)

// busyTimeout is how long a statement waits for another connection's
// lock, and how long Open keeps retrying the switch to WAL.
const busyTimeout = 5 * time.Second

// busyTimeoutPragma sets busyTimeout on each connection, the read-only
// opener's too.
func busyTimeoutPragma() string {
	return fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())
}

// primaryCode is the primary result code (SQLITE_BUSY, ...) of an error
// from SQLite, without its extended bits.
func primaryCode(err error) (int, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0, false
	}
	return se.Code() & 0xff, true
}

type sqliteEngine struct{}

func (sqliteEngine) name() string           { return EngineSQLite }
func (sqliteEngine) rebind(q string) string { return q }
func (sqliteEngine) migration(i int) string { return migrations[i].sqlite }

// lockSchema: each migration transaction is immediate, so it already
// holds the write lock.
func (sqliteEngine) lockSchema(context.Context, *sql.Conn) (func(), error) { return func() {}, nil }

func (sqliteEngine) schemaVersion(ctx context.Context, q rowQuerier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// setSchemaVersion: user_version lives in the file header and commits
// with the step.
func (sqliteEngine) setSchemaVersion(ctx context.Context, tx *sql.Tx, v int) error {
	_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v))
	return err
}

func (sqliteEngine) explain(path string, err error) error {
	var oe *OpenError
	if errors.As(err, &oe) {
		return err
	}
	if code, ok := primaryCode(err); ok {
		switch code {
		case sqliteNotADB, sqliteCorrupt:
			return &OpenError{Path: path, Err: fmt.Errorf("%w: %v", ErrNotDatabase, err),
				Fix: "move the file aside or delete it; mcpx creates a new one (stored sign-ins and activity are lost)"}
		case sqliteBusy:
			return &OpenError{Path: path, Err: err,
				Fix: fmt.Sprintf("another process held its write lock for over %v; stop that process or choose another --state-dir", busyTimeout)}
		}
	}
	return &OpenError{Path: path, Err: err}
}

// Open opens (creating if needed) the SQLite database at path: parent
// directory 0700, file 0600, WAL journal, a busy timeout and foreign keys,
// and runs every pending migration.
func Open(path string) (*DB, error) {
	return openSQLite(path, LatestVersion)
}

func openSQLite(path string, target int) (*DB, error) {
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
	q.Add("_pragma", busyTimeoutPragma())
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL in WAL mode: commits do not fsync; a power loss may lose the
	// last transactions but never corrupts the file.
	q.Add("_pragma", "synchronous(NORMAL)")
	// Statement journals (each activity insert opens one) in memory rather
	// than in a temporary file: a write syscall less per row.
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Set("_txlock", "immediate")
	sdb, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, &OpenError{Path: path, Err: err}
	}
	d := &DB{sql: sdb, eng: sqliteEngine{}, where: path}
	if err := useWAL(sdb); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(path, err)
	}
	if err := d.migrateTo(context.Background(), target); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(path, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := restrict(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = sdb.Close()
			return nil, &OpenError{Path: path, Err: err}
		}
	}
	return d, nil
}

// useWAL switches the file to the WAL journal; the mode is stored in the
// file, so every later connection, ours or another process's, uses it.
// It is not a connection pragma because SQLite answers a switch that
// meets another connection's switch or transaction with SQLITE_BUSY at
// once, without waiting out the busy timeout: processes opening a new
// file together would fail. So it is retried here, within the timeout.
func useWAL(sdb *sql.DB) error {
	deadline := time.Now().Add(busyTimeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		// A file system without shared memory keeps the old mode and
		// answers with it; the store works, as before, without WAL.
		_, err := sdb.Exec("PRAGMA journal_mode = WAL")
		code, _ := primaryCode(err)
		switch {
		case err == nil:
			return nil
		case code != sqliteBusy || time.Now().After(deadline):
			return fmt.Errorf("switch to WAL journal: %w", err)
		}
		walBusy()
		time.Sleep(pause)
	}
}

// walBusy runs after each busy answer to the switch; tests end the lock.
var walBusy = func() {}

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
