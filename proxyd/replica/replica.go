// Package replica lets several proxyd processes share one state database:
// each joins the replicas table under its own id, publishes its servers'
// states on a heartbeat, and leaves on shutdown, so any replica can answer
// for all of them. Ids must be unique among live replicas.
package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// Heartbeat is how often a replica refreshes its row; a row not refreshed
// for Stale is no longer live.
const (
	Heartbeat = 5 * time.Second
	Stale     = 3 * Heartbeat
)

// EnvID names the replica when the --replica flag does not.
const EnvID = "MCPX_REPLICA"

// DefaultID is the replica id when none is configured: the host name,
// which is the pod name under Kubernetes.
func DefaultID() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "proxyd"
}

// Info is one replica's row.
type Info struct {
	ID      string          `json:"id"`
	Host    string          `json:"host"`
	PID     int             `json:"pid"`
	Version string          `json:"version"`
	Listen  string          `json:"listen"`
	Started time.Time       `json:"started"`
	Seen    time.Time       `json:"seen"`
	Servers json.RawMessage `json:"servers,omitempty"` // what the replica published
	Self    bool            `json:"self,omitempty"`
	Live    bool            `json:"live"`
}

// InUseError means another live process holds the replica id.
type InUseError struct {
	ID, Host string
	PID      int
	Seen     time.Duration
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("replica id %q is in use by pid %d on %s (seen %s ago): give each proxyd sharing the state its own id (--replica or %s)",
		e.ID, e.PID, e.Host, e.Seen.Round(time.Second), EnvID)
}

// Registry is this process's membership.
type Registry struct {
	db      *store.DB
	id      string
	host    string
	pid     int
	started time.Time
	now     func() time.Time
}

// New returns the registry of replica id over db.
func New(db *store.DB, id string) *Registry {
	host, _ := os.Hostname()
	return &Registry{db: db, id: id, host: host, pid: os.Getpid(), started: time.Now(), now: time.Now}
}

// ID is this replica's id.
func (r *Registry) ID() string { return r.id }

// Join takes the replica's row: refused while another live process on
// another host holds the id, or on this host while that process runs.
func (r *Registry) Join(ctx context.Context, version, listen string) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("join replicas: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.Lock(ctx, store.LockRow, "replica:"+r.id); err != nil {
		return err
	}
	var host string
	var pid int
	var seen int64
	err = tx.QueryRowContext(ctx, `SELECT host, pid, seen FROM replicas WHERE id = ?`, r.id).Scan(&host, &pid, &seen)
	if err == nil && !(host == r.host && pid == r.pid) {
		age := r.now().Sub(time.UnixMilli(seen))
		alive := age < Stale
		if alive && host == r.host {
			alive = store.ProcessAlive(pid)
		}
		if alive {
			return &InUseError{ID: r.id, Host: host, PID: pid, Seen: age}
		}
	}
	now := r.now().UnixMilli()
	_, err = tx.ExecContext(ctx, `INSERT INTO replicas (id, host, pid, version, listen, started, seen, servers)
		VALUES (?, ?, ?, ?, ?, ?, ?, '')
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version,
		listen = excluded.listen, started = excluded.started, seen = excluded.seen, servers = ''`,
		r.id, r.host, r.pid, version, listen, r.started.UnixMilli(), now)
	if err != nil {
		return fmt.Errorf("join replicas: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("join replicas: %w", err)
	}
	return nil
}

// Beat refreshes the row with the servers' current states (any JSON).
func (r *Registry) Beat(ctx context.Context, servers any) error {
	b, err := json.Marshal(servers)
	if err != nil {
		return err
	}
	_, err = r.db.ExecContext(ctx, `UPDATE replicas SET seen = ?, servers = ? WHERE id = ? AND pid = ? AND host = ?`,
		r.now().UnixMilli(), string(b), r.id, r.pid, r.host)
	if err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	return nil
}

// Leave removes the row (a clean shutdown); records keep the id.
func (r *Registry) Leave(ctx context.Context) error {
	_, err := r.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = ? AND pid = ? AND host = ?`, r.id, r.pid, r.host)
	return err
}

// List returns every replica row, live or not, this one first.
func (r *Registry) List(ctx context.Context) ([]Info, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, host, pid, version, listen, started, seen, servers FROM replicas ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	defer rows.Close()
	var out []Info
	now := r.now()
	for rows.Next() {
		var in Info
		var started, seen int64
		var servers string
		if err := rows.Scan(&in.ID, &in.Host, &in.PID, &in.Version, &in.Listen, &started, &seen, &servers); err != nil {
			return nil, fmt.Errorf("list replicas: %w", err)
		}
		in.Started, in.Seen = time.UnixMilli(started), time.UnixMilli(seen)
		if servers != "" {
			in.Servers = json.RawMessage(servers)
		}
		in.Self = in.ID == r.id && in.PID == r.pid && in.Host == r.host
		in.Live = in.Self || now.Sub(in.Seen) < Stale
		if in.Self {
			out = append([]Info{in}, out...)
		} else {
			out = append(out, in)
		}
	}
	return out, rows.Err()
}
