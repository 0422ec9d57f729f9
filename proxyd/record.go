package proxyd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/health"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// Record is proxyd's state database read without the daemon, read-only:
// the activity log, the health it implies and the sign-in state, in the
// control API's own types. Commands use it when proxyd is not running.
type Record struct {
	db  *store.DB
	act *activity.Store
	cfg *config.Config
}

// OpenRecord opens the state database that proxyd would use with this
// config file and state dir (SQLite in the state dir, or the PostgreSQL of
// state.postgres / MCPX_STATE_DSN) for reading only.
func OpenRecord(ctx context.Context, configPath, stateDir string) (*Record, error) {
	cfg, err := config.Load(configPath)
	if errors.Is(err, os.ErrNotExist) {
		cfg, err = &config.Config{}, nil
	}
	if err != nil {
		return nil, err
	}
	dsn, err := cfg.StateDSN()
	if err != nil {
		return nil, err
	}
	var db *store.DB
	if dsn == "" {
		db, err = store.OpenSQLiteReadOnly(ctx, filepath.Join(stateDir, DBFile))
	} else {
		db, err = store.OpenPostgresReadOnly(ctx, dsn)
	}
	if err != nil {
		return nil, err
	}
	return &Record{db: db, act: activity.NewReader(db), cfg: cfg}, nil
}

// Where names the database: the SQLite file, or PostgreSQL without its
// password.
func (r *Record) Where() string { return r.db.Engine() + " " + r.db.Path() }

// Close closes the database.
func (r *Record) Close() error { return r.db.Close() }

func recordFilter(q api.ActivityQuery) (activity.Filter, error) {
	return filterFromQuery(q.Values())
}

// Activity is GET /v1/activity from the record.
func (r *Record) Activity(ctx context.Context, q api.ActivityQuery) ([]api.ActivityRecord, error) {
	f, err := recordFilter(q)
	if err != nil {
		return nil, err
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	recs, err := r.act.List(ctx, f)
	if recs == nil {
		recs = []api.ActivityRecord{}
	}
	return recs, err
}

// ActivityRecord is GET /v1/activity/{id} from the record.
func (r *Record) ActivityRecord(ctx context.Context, id int64) (*api.ActivityRecord, error) {
	rec, err := r.act.Get(ctx, id)
	if errors.Is(err, activity.ErrNotFound) {
		return nil, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no activity record %d", id)}
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// ExportActivity calls fn with every matching record, oldest first.
func (r *Record) ExportActivity(ctx context.Context, q api.ActivityQuery, fn func(api.ActivityRecord) error) error {
	f, err := recordFilter(q)
	if err != nil {
		return err
	}
	return r.act.Export(ctx, f, fn)
}

// ActivitySummary is GET /v1/activity/summary from the record.
func (r *Record) ActivitySummary(ctx context.Context, q api.ActivityQuery, by string) ([]api.ActivitySummaryRow, error) {
	f, err := recordFilter(q)
	if err != nil {
		return nil, err
	}
	rows, err := r.act.Summary(ctx, f, by)
	if rows == nil {
		rows = []api.ActivitySummaryRow{}
	}
	return rows, err
}

// Health is each configured server's call health over the last window,
// replayed from the activity log (of the named replicas' calls only,
// when any are named, as a running replica filters its peers' views);
// the state is unknown without the daemon. With several replicas' calls
// in the window (or several named), each replica's servers are listed,
// as a running replica lists every live one's.
func (r *Record) Health(ctx context.Context, server string, replicas ...string) ([]api.ServerStatus, error) {
	counts, err := r.act.ToolCallsEnded(ctx, healthSince(), health.BucketWidth, replicas...)
	if err != nil {
		return nil, err
	}
	trackers := map[string]*health.Tracker{}
	for _, id := range replicas {
		trackers[id] = health.NewTracker(nil)
	}
	for _, c := range counts {
		if trackers[c.Replica] == nil {
			trackers[c.Replica] = health.NewTracker(nil)
		}
		addEnded(trackers[c.Replica], c)
	}
	if len(trackers) == 0 {
		trackers[""] = health.NewTracker(nil)
	}
	out := []api.ServerStatus{}
	for _, id := range slices.Sorted(maps.Keys(trackers)) {
		for _, st := range ConfiguredServers(r.cfg) {
			if server != "" && st.Name != server {
				continue
			}
			h := trackers[id].Snapshot(st.Name)
			st.Replica = id
			st.Health = &api.Health{Calls: h.Calls, Failed: h.Failed, DominantClass: h.DominantClass, Degraded: h.Degraded, Summary: h.Summary}
			out = append(out, st)
		}
	}
	if server != "" && len(out) == 0 {
		return nil, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no server named %q in the config", server)}
	}
	return out, nil
}

// healthSince is where a replay of the health window starts: a call that
// started up to a window before the window's start may have ended in it.
func healthSince() time.Time { return time.Now().Add(-2 * health.Window) }

// addEnded counts c into tr at its end, as a running proxyd counted it.
func addEnded(tr *health.Tracker, c activity.EndedCount) {
	tr.Add(c.Server, callerr.Classification{Class: c.ErrorClass, Domain: c.FaultDomain}, c.End, c.Calls)
}

// replayHealth counts into tr the tool calls of the health window ending
// now that the activity log holds (of these replicas only, when named):
// the record read while proxyd is down, and a proxyd starting again,
// give the window the same answer.
func replayHealth(ctx context.Context, act *activity.Store, tr *health.Tracker, replicas ...string) error {
	counts, err := act.ToolCallsEnded(ctx, healthSince(), health.BucketWidth, replicas...)
	if err != nil {
		return err
	}
	for _, c := range counts {
		addEnded(tr, c)
	}
	return nil
}

// ConfiguredServers are the config's servers as a status reports them
// while proxyd is not running: state unknown (or disabled), no
// connection's fields.
func ConfiguredServers(cfg *config.Config) []api.ServerStatus {
	out := []api.ServerStatus{}
	for _, s := range cfg.Servers {
		st := api.ServerStatus{Name: s.Name, Transport: s.EffectiveTransport(), Protocol: s.EffectiveProtocol(), Target: s.Target(),
			State: api.StateUnknown, Summary: "proxyd is not running"}
		if s.Disabled {
			st.State = api.StateDisabled
		}
		out = append(out, st)
	}
	return out
}

// AuthStatus is GET /v1/auth/status from the stored grants.
func (r *Record) AuthStatus(ctx context.Context, server string) ([]api.AuthStatus, error) {
	coord := oauth.NewCoordinator(oauth.NewStore(r.db), oauth.CoordinatorOptions{})
	out := []api.AuthStatus{}
	for _, s := range r.cfg.Servers {
		if s.URL == "" || (server != "" && s.Name != server) {
			continue
		}
		as := coord.Status(serverKey(s))
		as.Server, as.URL = s.Name, redact.URL(s.URL)
		out = append(out, as)
	}
	if server != "" && len(out) == 0 {
		return nil, &api.Error{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no HTTP server named %q in the config", server)}
	}
	return out, nil
}
