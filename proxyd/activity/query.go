package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

const selectCols = `id, ts, server, tool, duration_us, status, error, error_class, fault_domain,
	upstream_http_status, request_id, client, protocol_era, reinit, retried, token_refresh, reason, replica,
	progress, inputs, method`

// where renders the filter as SQL conditions over indexed columns.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	set := func(col string, vals []string) {
		switch len(vals) {
		case 0:
		case 1:
			// A single value keeps the (col, ts) index usable for ordering.
			conds = append(conds, col+" = ?")
			args = append(args, vals[0])
		default:
			conds = append(conds, col+" IN (?"+strings.Repeat(",?", len(vals)-1)+")")
			for _, v := range vals {
				args = append(args, v)
			}
		}
	}
	set("server", f.Servers)
	set("tool", f.Tools)
	set("status", f.Statuses)
	// These columns' indexes hold only rows with a value (schema 7); the
	// literal term lets the planner use them for a filter that names
	// values, as every filter does.
	partial := func(col string, vals []string) {
		set(col, vals)
		if len(vals) > 0 && !slices.Contains(vals, "") {
			conds = append(conds, col+" != ''")
		}
	}
	partial("error_class", f.ErrorClasses)
	partial("fault_domain", f.FaultDomains)
	partial("replica", f.Replicas)
	if !f.Since.IsZero() {
		conds = append(conds, "ts >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds = append(conds, "ts <= ?")
		args = append(args, f.Until.UnixNano())
	}
	if f.AfterID > 0 {
		conds = append(conds, "id > ?")
		args = append(args, f.AfterID)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(sc scanner) (Record, error) {
	var r Record
	var ts, durUS int64
	if err := sc.Scan(&r.ID, &ts, &r.Server, &r.Tool, &durUS, &r.Status, &r.Error, &r.ErrorClass, &r.FaultDomain,
		&r.UpstreamHTTPStatus, &r.RequestID, &r.Client, &r.ProtocolEra, &r.Reinit, &r.Retried, &r.TokenRefresh, &r.Reason, &r.Replica,
		&r.Progress, &r.Inputs, &r.Method); err != nil {
		return Record{}, err
	}
	r.Time = time.Unix(0, ts).UTC()
	r.DurationMS = float64(durUS) / 1000
	return r, nil
}

// listQuery is List's SQL: newest first, so an index on (column, ts)
// answers a one-value filter without sorting.
func listQuery(f Filter) (string, []any) {
	where, args := f.where()
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	return `SELECT ` + selectCols + ` FROM activity` + where + ` ORDER BY ts DESC, id DESC LIMIT ?`, append(args, limit)
}

// List returns matching records, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Record, error) {
	q, args := listQuery(f)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("list activity: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list activity: %w", err)
	}
	return out, nil
}

// Get returns one record, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Record, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, `SELECT `+selectCols+` FROM activity WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("activity record %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get activity record %d: %w", id, err)
	}
	return r, nil
}

// exportPage is how many rows one export query reads; pages keep memory
// constant and no read snapshot open while fn runs.
const exportPage = 500

// Export calls fn for every matching record, oldest first, a page at a time
// (constant memory at any size). An error from fn stops the export and is
// returned.
func (s *Store) Export(ctx context.Context, f Filter, fn func(Record) error) error {
	where, args := f.where()
	if where == "" {
		where = " WHERE "
	} else {
		where += " AND "
	}
	q := `SELECT ` + selectCols + ` FROM activity` + where + `(ts > ? OR (ts = ? AND id > ?)) ORDER BY ts, id LIMIT ?`
	var lastTS, lastID int64 = -1 << 63, 0
	remaining := f.Limit
	page := make([]Record, 0, exportPage)
	for {
		n := exportPage
		if f.Limit > 0 && remaining < n {
			n = remaining
		}
		if n == 0 {
			return nil
		}
		page = page[:0]
		rows, err := s.db.QueryContext(ctx, q, append(slices.Clone(args), lastTS, lastTS, lastID, n)...)
		if err != nil {
			return fmt.Errorf("export activity: %w", err)
		}
		for rows.Next() {
			r, err := scanRecord(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("export activity: %w", err)
			}
			page = append(page, r)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("export activity: %w", err)
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < n {
			return nil
		}
		last := page[len(page)-1]
		lastTS, lastID = last.Time.UnixNano(), last.ID
		remaining -= len(page)
	}
}

// EndedCount is how many tool calls of one replica, server and outcome
// ended in one slot of time (see Store.ToolCallsEnded).
type EndedCount struct {
	Replica, Server, ErrorClass, FaultDomain string
	End                                      time.Time // the slot's start
	Calls                                    int
}

// ToolCallsEnded counts the tool calls (records without a method) that
// started at or after since, by replica, server, outcome and the slot of
// width their end falls in; of these replicas only, when named. One
// grouped query, so its cost is the window's slots rather than its
// records.
func (s *Store) ToolCallsEnded(ctx context.Context, since time.Time, width time.Duration, replicas ...string) ([]EndedCount, error) {
	q := `SELECT replica, server, error_class, fault_domain, (ts + duration_us * 1000) / ? AS slot, COUNT(*) FROM activity
		WHERE ts >= ? AND method = ''`
	args := []any{width.Nanoseconds(), since.UnixNano()}
	if len(replicas) > 0 {
		q += ` AND replica IN (?` + strings.Repeat(",?", len(replicas)-1) + `)`
		for _, r := range replicas {
			args = append(args, r)
		}
	}
	q += ` GROUP BY replica, server, error_class, fault_domain, slot`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("count tool calls: %w", err)
	}
	defer rows.Close()
	var out []EndedCount
	for rows.Next() {
		var c EndedCount
		var slot int64
		if err := rows.Scan(&c.Replica, &c.Server, &c.ErrorClass, &c.FaultDomain, &slot, &c.Calls); err != nil {
			return nil, fmt.Errorf("count tool calls: %w", err)
		}
		c.End = time.Unix(0, slot*width.Nanoseconds())
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count tool calls: %w", err)
	}
	return out, nil
}

// SummaryRow is one group of a summary; its wire shape is
// api.ActivitySummaryRow.
type SummaryRow = api.ActivitySummaryRow

// ErrBadGroup is returned by Summary for an unknown grouping.
var ErrBadGroup = errors.New("unknown summary grouping")

// Summary counts calls and failures per server, tool, error_class or
// fault_domain, most calls first. Limit is ignored.
func (s *Store) Summary(ctx context.Context, f Filter, by string) ([]SummaryRow, error) {
	if !slices.Contains(api.SummaryGroups, by) {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrBadGroup, by, strings.Join(api.SummaryGroups, ", "))
	}
	where, args := f.where()
	rows, err := s.db.QueryContext(ctx, `SELECT `+by+`, count(*), sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) FROM activity`+where+
		` GROUP BY `+by+` ORDER BY count(*) DESC, `+by, args...)
	if err != nil {
		return nil, fmt.Errorf("summarise activity: %w", err)
	}
	defer rows.Close()
	out := []SummaryRow{}
	for rows.Next() {
		var r SummaryRow
		if err := rows.Scan(&r.Key, &r.Calls, &r.Failed); err != nil {
			return nil, fmt.Errorf("summarise activity: %w", err)
		}
		if r.Calls > 0 {
			r.FailureRate = float64(r.Failed) / float64(r.Calls)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("summarise activity: %w", err)
	}
	return out, nil
}

// subscriber is one live follower.
type subscriber struct {
	f  Filter
	ch chan Record
}

// SubscriberBuffer is how many records a follower may fall behind before
// it misses some.
const SubscriberBuffer = 256

// Subscribe streams records matching f as they are written. A subscriber
// that falls behind misses records (counted by SubscriberDropped) rather
// than slowing the writer. Call cancel to stop; the channel is then closed.
// Close also closes it.
func (s *Store) Subscribe(f Filter) (<-chan Record, func()) {
	sub := &subscriber{f: f, ch: make(chan Record, SubscriberBuffer)}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		close(sub.ch)
		return sub.ch, func() {}
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return sub.ch, func() {
		once.Do(func() {
			s.mu.Lock()
			if _, ok := s.subs[sub]; ok {
				delete(s.subs, sub)
				close(sub.ch)
			}
			s.mu.Unlock()
		})
	}
}

func (s *Store) publish(batch []Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs {
		for _, r := range batch {
			if !sub.f.Match(r) {
				continue
			}
			select {
			case sub.ch <- r:
			default:
				s.subDropped.Add(1)
			}
		}
	}
}
