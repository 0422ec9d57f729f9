package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// schemaLockID is the advisory lock key that serialises migrations of one
// database across processes ("mcpx" and 1).
const schemaLockID = 0x6d637078_00000001

// pgEngine is PostgreSQL through pgx's database/sql driver.
type pgEngine struct {
	bound sync.Map // query -> rebound query; the set of queries is fixed
}

func (*pgEngine) name() string           { return EnginePostgres }
func (*pgEngine) migration(i int) string { return migrations[i].postgres }

func (e *pgEngine) rebind(q string) string {
	if v, ok := e.bound.Load(q); ok {
		return v.(string)
	}
	r := rebindDollar(q)
	e.bound.Store(q, r)
	return r
}

// rebindDollar numbers ?-placeholders as $1, $2, ... outside quoted text.
func rebindDollar(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// lockSchema takes a session-level advisory lock before any transaction
// begins: a transaction that waited for the lock would keep a catalog
// snapshot from before the other process's migration.
func (*pgEngine) lockSchema(ctx context.Context, conn *sql.Conn) (func(), error) {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(schemaLockID)); err != nil {
		return nil, err
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(schemaLockID))
	}, nil
}

func (*pgEngine) schemaVersion(ctx context.Context, q rowQuerier) (int, error) {
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT to_regclass('mcpx_schema') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := q.QueryRowContext(ctx, `SELECT version FROM mcpx_schema`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func (*pgEngine) setSchemaVersion(ctx context.Context, tx *sql.Tx, v int) error {
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS mcpx_schema (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcpx_schema`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO mcpx_schema (version) VALUES ($1)`, v)
	return err
}

func (*pgEngine) explain(where string, err error) error {
	var oe *OpenError
	if errors.As(err, &oe) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return &OpenError{Path: where, Err: fmt.Errorf("authentication failed (%s)", pe.Code),
				Fix: "check the credentials that state.postgres or MCPX_STATE_DSN refers to"}
		case "3D000": // invalid_catalog_name
			return &OpenError{Path: where, Err: fmt.Errorf("database does not exist (%s)", pe.Code),
				Fix: "create it (createdb) or name an existing one in the DSN"}
		case "42501": // insufficient_privilege
			return &OpenError{Path: where, Err: fmt.Errorf("permission denied: %s", pe.Message),
				Fix: "grant the role CREATE on the database's schema, or run the first start as its owner"}
		}
		return &OpenError{Path: where, Err: fmt.Errorf("%s (%s)", pe.Message, pe.Code)}
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return &OpenError{Path: where, Err: fmt.Errorf("cannot connect: %s", connectCause(err)),
			Fix: "check that the server is running and reachable at the DSN's host and port"}
	}
	return &OpenError{Path: where, Err: err}
}

// connectCause is the innermost message of a connect error; pgx's outer
// text repeats the DSN.
func connectCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// RedactDSN is dsn as it may be printed: user, host, port and database,
// never the password or other parameters.
func RedactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "postgres://[unparseable DSN]"
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		return fmt.Sprintf("postgres://%s@/%s?host=%s", cfg.User, cfg.Database, host)
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, net.JoinHostPort(host, strconv.Itoa(int(cfg.Port))), cfg.Database)
}

// pgConfig parses dsn, with a connect timeout when it sets none; where
// names the database without its password, for messages.
func pgConfig(dsn string) (where string, cfg *pgx.ConnConfig, err error) {
	where = RedactDSN(dsn)
	cfg, err = pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN: say only what is wrong.
		return where, nil, &OpenError{Path: where, Err: errors.New("not a valid PostgreSQL connection string"),
			Fix: "use postgres://USER@HOST:PORT/DATABASE, with the password in a ${env:...} or ${file:...} reference"}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	return where, cfg, nil
}

// OpenPostgres connects to the PostgreSQL database of dsn and runs every
// pending migration. Errors name the database without its password.
// appName, when the DSN sets none, is the connections' application_name
// (it shows in pg_stat_activity: proxyd names its replica).
func OpenPostgres(ctx context.Context, dsn string, appName ...string) (*DB, error) {
	return openPostgres(ctx, dsn, LatestVersion, appName...)
}

func openPostgres(ctx context.Context, dsn string, target int, appName ...string) (*DB, error) {
	where, cfg, err := pgConfig(dsn)
	if err != nil {
		return nil, err
	}
	if _, set := cfg.RuntimeParams["application_name"]; !set && len(appName) > 0 && appName[0] != "" {
		cfg.RuntimeParams["application_name"] = appName[0]
	}
	sdb := stdlib.OpenDB(*cfg)
	// A refresh holds a connection across its token request; activity,
	// status and the lease take a few more.
	sdb.SetMaxOpenConns(16)
	sdb.SetMaxIdleConns(8)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	d := &DB{sql: sdb, eng: &pgEngine{}, where: where}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := sdb.PingContext(pctx); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(where, err)
	}
	if err := d.migrateTo(ctx, target); err != nil {
		_ = sdb.Close()
		return nil, d.eng.explain(where, err)
	}
	return d, nil
}
