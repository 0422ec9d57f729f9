// Package activity records every tool call proxyd makes: a batched writer off
// the call path, filtered queries, live follow, streaming export, summaries
// and bounded retention.
package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// ErrNotFound is returned by Get for an unknown id.
var ErrNotFound = errors.New("activity record not found")

// ErrClosed is returned by Flush after Close.
var ErrClosed = errors.New("activity store closed")

// Record is one tool call; its wire shape is api.ActivityRecord.
type Record = api.ActivityRecord

// Input is one request of the upstream for input during a call and the
// client's answer: accept, decline, cancel, error, refused (the client
// cannot answer it) or asked (a modern client answers in its retry).
type Input struct {
	Method string
	Action string
}

// FormatInputs is Record.Inputs for a call's inputs.
func FormatInputs(in []Input) string {
	parts := make([]string, len(in))
	for i, x := range in {
		parts[i] = x.Method + "=" + x.Action
	}
	return strings.Join(parts, ", ")
}

// Filter selects records. Empty slices and zero times match everything;
// values within one slice are alternatives.
type Filter struct {
	Servers      []string
	Tools        []string
	Statuses     []string
	ErrorClasses []string
	FaultDomains []string
	Replicas     []string
	Since        time.Time // inclusive
	Until        time.Time // inclusive
	// Limit caps List (DefaultLimit when <= 0) and Export (no cap when <= 0).
	Limit int
	// AfterID keeps records with a larger id (resuming a follow).
	AfterID int64
}

// DefaultLimit is List's limit when the filter sets none.
const DefaultLimit = 1000

// Match reports whether r passes the filter (Limit aside).
func (f Filter) Match(r Record) bool {
	in := func(set []string, v string) bool { return len(set) == 0 || slices.Contains(set, v) }
	return in(f.Servers, r.Server) && in(f.Tools, r.Tool) && in(f.Statuses, r.Status) &&
		in(f.ErrorClasses, r.ErrorClass) && in(f.FaultDomains, r.FaultDomain) && in(f.Replicas, r.Replica) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since)) && (f.Until.IsZero() || !r.Time.After(f.Until)) &&
		r.ID > f.AfterID
}

// Options tune the store. Zero values take the defaults below.
type Options struct {
	// MaxAge and MaxRows bound retention; negative disables the bound.
	MaxAge  time.Duration
	MaxRows int
	// BatchSize is the most records written per transaction.
	BatchSize int
	// FlushInterval is how long a partial batch waits for company.
	FlushInterval time.Duration
	// QueueSize is the number of records Add can buffer.
	QueueSize int
	// RetentionInterval is how often retention runs.
	RetentionInterval time.Duration
	// Replica is stamped on every record added without one.
	Replica string
	// Durability is DurabilityBatch (default) or DurabilitySync.
	Durability string
	Now        func() time.Time
}

// Durabilities. With batch, Add returns at once and a record is committed
// with its batch, within FlushInterval or as soon as BatchSize records
// wait: a crash (SIGKILL) loses at most what was added in that window,
// more only when the writer falls behind (up to QueueSize). With sync, Add
// returns once its record is committed (concurrent calls share commits):
// nothing a caller saw finish is lost, at the cost of a commit on the
// call's path.
const (
	DurabilityBatch = "batch"
	DurabilitySync  = "sync"
)

// Defaults.
const (
	DefaultMaxAge            = 30 * 24 * time.Hour
	DefaultMaxRows           = 1_000_000
	DefaultBatchSize         = 512
	DefaultFlushInterval     = 50 * time.Millisecond
	DefaultQueueSize         = 8192
	DefaultRetentionInterval = time.Minute
	// MaxErrorLen bounds the stored error text.
	MaxErrorLen = 4096
	// MaxNameLen bounds the stored tool (or "METHOD NAME"), method,
	// request id and client: a client's unknown tool is recorded by the
	// name it sent, whatever its length.
	MaxNameLen = 1024
	// addWait bounds how long Add waits for room before dropping.
	addWait = 5 * time.Millisecond
	// retentionBatch is the most rows one retention statement deletes.
	retentionBatch = 1000
)

func (o Options) withDefaults() Options {
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxRows == 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = DefaultRetentionInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// item is a record to write, or a flush request when done is set; a
// record with committed set is one whose writer waits for its commit.
type item struct {
	rec       Record
	done      chan error
	committed chan error
}

// Store is the activity log over the state database.
type Store struct {
	db   *store.DB
	opts Options

	queue   chan item
	kick    chan struct{} // see nudge
	stop    chan struct{}
	stopped chan struct{}
	closed  atomic.Bool
	once    sync.Once

	dropped    atomic.Uint64
	subDropped atomic.Uint64
	writeErrs  atomic.Uint64
	// writerThread is the thread the writer lowered to writerNice, 0
	// until then and where it does not (other OSes, sync durability).
	writerThread atomic.Int64
	// lowered takes the work ownProc runs on that thread.
	lowered chan func()

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	lastMu sync.Mutex
	last   error

	// inserts are the writer's prepared INSERTs by their number of rows
	// (powers of two up to insertRows); only the writer uses them.
	inserts map[int]*sql.Stmt
	// lastID: the engine numbers an INSERT's rows consecutively, so the
	// last row's id gives them all (SQLite); else they are RETURNed.
	lastID bool
	// floor is the lowest id a batch's retire looks at (0: read it
	// again; each periodic trim, which may have deleted below or above
	// it, says so), retireStmt its delete; the writer's.
	floor      atomic.Int64
	retireStmt *sql.Stmt
}

// NewStore starts the background writer; Close stops it.
func NewStore(db *store.DB, opts Options) *Store {
	s := &Store{
		db:      db,
		opts:    opts.withDefaults(),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		subs:    make(map[*subscriber]struct{}),
	}
	s.queue = make(chan item, s.opts.QueueSize)
	s.kick = make(chan struct{}, 1)
	s.lastID = db.Engine() == store.EngineSQLite
	if s.opts.Durability == DurabilitySync {
		// Every call waits for its commit: the writer keeps its priority.
		go s.run()
	} else {
		// The writer's long work yields the cores to the calls it records
		// (see writerNice); the writer starts once its thread is lowered.
		s.lowered = make(chan func())
		goLowered(s.serveLowered, &s.writerThread)
	}
	return s
}

// serveLowered starts the writer and runs, on the lowered thread, the
// writer's work that takes a processor of its own (ownProc) until the
// writer stops. The writer itself (taking records, its timers, a batch
// written between lone calls) runs at the calls' priority: it wakes once
// or twice a batch, and each time the lowered thread would have to be
// given proxyd's one processor while calls come one at a time, and then
// to be put on a core by the kernel, which keeps a niced thread off a
// contended one for up to milliseconds (14 ms seen), the processor held
// all along and the requests arriving meanwhile waiting for it.
func (s *Store) serveLowered() {
	go s.run()
	if s.writerThread.Load() == 0 {
		return // not lowered: ownProc runs the work on the writer's goroutine
	}
	for {
		select {
		case f := <-s.lowered:
			f()
		case <-s.stopped:
			return
		}
	}
}

// Add queues r for writing and returns at once; it never waits on disk. If
// the queue stays full for a few milliseconds the record is dropped and
// counted (Dropped). The time defaults to now and the status to error when
// an error class is set, else ok. Error and reason texts are redacted and
// stripped of control characters before they are stored; names longer
// than MaxNameLen are cut.
func (s *Store) Add(r Record) {
	if s.closed.Load() {
		s.dropped.Add(1)
		return
	}
	r.Tool, r.Method = truncate(r.Tool, MaxNameLen), truncate(r.Method, MaxNameLen)
	r.RequestID, r.Client = truncate(r.RequestID, MaxNameLen), truncate(r.Client, MaxNameLen)
	if r.Time.IsZero() {
		r.Time = s.opts.Now()
	}
	if r.Replica == "" {
		r.Replica = s.opts.Replica
	}
	if r.Status == "" {
		r.Status = api.StatusOK
		if r.ErrorClass != "" {
			r.Status = api.StatusError
		}
	}
	it := item{rec: r}
	if s.opts.Durability == DurabilitySync {
		it.committed = make(chan error, 1)
		select {
		case s.queue <- it:
		case <-s.stop:
			s.dropped.Add(1)
			return
		}
		s.nudge()
		select {
		case <-it.committed:
		case <-s.stopped:
		}
		return
	}
	select {
	case s.queue <- it:
		s.nudgeIfFull()
		return
	default:
	}
	t := time.NewTimer(addWait)
	defer t.Stop()
	select {
	case s.queue <- it:
		s.nudgeIfFull()
	case <-t.C:
		s.dropped.Add(1)
	case <-s.stop:
		s.dropped.Add(1)
	}
}

// nudge wakes the writer to take what waits in the queue now: a flush or
// a record whose caller waits for its commit. Batched records do not,
// until a batch's worth waits or the queue is half full (nudgeIfFull).
func (s *Store) nudge() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Store) nudgeIfFull() {
	if n := len(s.queue); n >= s.opts.BatchSize || n >= cap(s.queue)/2 {
		s.nudge()
	}
}

// Durability is the store's: with DurabilitySync a call's record must be
// committed before its caller is answered.
func (s *Store) Durability() string { return s.opts.Durability }

// Dropped counts records lost: the queue was full, the store was closed, or
// their batch failed to write.
func (s *Store) Dropped() uint64 { return s.dropped.Load() }

// SubscriberDropped counts live records a slow subscriber missed.
func (s *Store) SubscriberDropped() uint64 { return s.subDropped.Load() }

// WriteErrors counts batches that failed to write; LastError is the latest.
func (s *Store) WriteErrors() uint64 { return s.writeErrs.Load() }

// LastError is the latest write or retention error, or nil.
func (s *Store) LastError() error {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	return s.last
}

// Flush waits until every record added before the call is written.
func (s *Store) Flush(ctx context.Context) error {
	if s.closed.Load() {
		return ErrClosed
	}
	done := make(chan error, 1)
	select {
	case s.queue <- item{done: done}:
		s.nudge()
	case <-s.stopped:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("flush activity: %w", ctx.Err())
	}
	select {
	case err := <-done:
		return err
	case <-s.stopped:
		// The writer may have answered just before stopping.
		select {
		case err := <-done:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		return fmt.Errorf("flush activity: %w", ctx.Err())
	}
}

// Close writes what is queued, stops the writer and ends subscriptions. The
// database stays open (it belongs to the caller).
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		<-s.stopped
		for _, st := range s.inserts {
			_ = st.Close()
		}
		if s.retireStmt != nil {
			_ = s.retireStmt.Close()
		}
		s.mu.Lock()
		for sub := range s.subs {
			close(sub.ch)
			delete(s.subs, sub)
		}
		s.mu.Unlock()
	})
	return s.LastError()
}

func (s *Store) setErr(err error) {
	s.lastMu.Lock()
	s.last = err
	s.lastMu.Unlock()
}

// run is the single writer: it batches records, answers flushes and
// trims old rows between batches.
func (s *Store) run() {
	defer close(s.stopped)
	batch := make([]Record, 0, s.opts.BatchSize)
	var flushes []chan error
	var flushTimer *time.Timer
	var flushC <-chan time.Time
	retention := time.NewTimer(0) // trim once at start
	defer retention.Stop()

	write := func() {
		var err error
		if len(batch) > 0 {
			err = s.write(batch)
			if err != nil {
				s.writeErrs.Add(1)
				s.dropped.Add(uint64(len(batch)))
				s.setErr(err)
			}
		}
		for _, d := range flushes {
			d <- err
		}
		batch, flushes = batch[:0], flushes[:0]
		if flushTimer != nil {
			flushTimer.Stop()
			flushTimer, flushC = nil, nil
		}
	}
	take := func(it item) {
		if it.done != nil {
			flushes = append(flushes, it.done)
			return
		}
		batch = append(batch, it.rec)
		if it.committed != nil {
			flushes = append(flushes, it.committed)
		}
	}

	// fill takes what is already waiting, up to a batch: records whose
	// callers wait for the commit share one.
	fill := func() {
		for len(batch) < s.opts.BatchSize {
			select {
			case it := <-s.queue:
				take(it)
			default:
				return
			}
		}
	}
	// settle writes a full batch or one a caller waits for, and otherwise
	// makes the batch due within the flush interval.
	settle := func() {
		if len(batch) >= s.opts.BatchSize || len(flushes) > 0 {
			write()
		} else if flushTimer == nil && len(batch) > 0 {
			flushTimer = time.NewTimer(s.opts.FlushInterval)
			flushC = flushTimer.C
		}
	}

	for {
		// While a batch is due, the records after its first wait in the
		// queue until it is (or a caller needs them, see nudge) rather
		// than waking the writer one by one.
		queue := s.queue
		if flushC != nil {
			queue = nil
		}
		select {
		case it := <-queue:
			take(it)
			fill()
			settle()
		case <-s.kick:
			fill()
			settle()
		case <-flushC:
			flushTimer, flushC = nil, nil
			fill()
			write()
		case <-retention.C:
			var more bool
			var err error
			s.ownProc(func() { more, err = s.trim(context.Background()) })
			if err != nil {
				s.setErr(err)
			}
			next := s.opts.RetentionInterval
			if more {
				next = 10 * time.Millisecond // keep going, a batch at a time
			}
			retention.Reset(next)
		case <-s.stop:
			for {
				select {
				case it := <-s.queue:
					take(it)
					if len(batch) >= s.opts.BatchSize {
						write()
					}
					continue
				default:
				}
				break
			}
			write()
			return
		}
	}
}

// ownProc runs f, a piece of the writer's work, with a processor of its
// own when the writer is lowered and the calls have one (see procs): a
// trim, or a batch while calls overlap (see write), holds its processor
// for its whole length.
func (s *Store) ownProc(f func()) {
	if s.writerThread.Load() == 0 {
		f()
		return
	}
	done := make(chan struct{})
	s.lowered <- func() {
		defer close(done)
		defer procs.Batch()()
		f()
	}
	<-done
}

// write commits a batch. A lowered writer takes a processor of its own
// for it (ownProc), except while lone calls run on proxyd's one
// processor (procs.Lone): taking one and giving it back each change the
// processor count, which stops the world, and on a busy machine that
// takes from tens of microseconds to milliseconds, long enough to put
// the call it stops among proxyd's slowest 1%. Then the batch is written
// on the calls' processor instead, at their priority (the lowered
// thread, off the CPU, would hold their only processor), a slice at a
// time between requests (see pauses).
func (s *Store) write(batch []Record) error {
	if s.writerThread.Load() != 0 && procs.Lone() {
		return s.insert(batch, sliceRows, pauses())
	}
	var err error
	s.ownProc(func() { err = s.insert(batch, insertRows, nil) })
	return err
}

// sliceRows is the most records a batch written between requests (see
// write) inserts at a time: about 100 µs of the SQL engine's work, the
// longest a request that arrives meanwhile waits for it.
const sliceRows = 8

// quietMax bounds the time a batch written between requests spends
// waiting for moments without one: a long call in flight, or calls
// without gaps, must not hold the batch (and with it SQLite's write lock,
// which other writers wait for) for long.
const quietMax = 20 * time.Millisecond

// yieldFor is a pause long enough not to have ended when the scheduler
// next looks for work, so that it first polls the network: a request
// that arrived during the last slice then goes before the next.
const yieldFor = 20 * time.Microsecond

// pauses returns what comes before each slice of a batch written between
// requests: it lets requests that have arrived go first and waits for a
// moment without any in flight, until the batch has waited quietMax in
// all. Once calls overlap they have processors enough, and the slices go
// on without pauses.
func pauses() func() {
	end := time.Now().Add(quietMax)
	return func() {
		left := time.Until(end)
		if left <= 0 || !procs.Lone() {
			return
		}
		time.Sleep(yieldFor)
		procs.WaitQuiet(left)
	}
}

// insert commits batch in statements of at most most records (a power
// of two), calling before, where set, ahead of each and of the commit.
func (s *Store) insert(batch []Record, most int, before func()) error {
	step := most // the deletes of retire, sliced as the inserts only between requests
	if before == nil {
		before = func() {}
		step = 0
	}
	ctx := context.Background()
	var tx *store.Tx
	defer func() {
		if tx != nil {
			_ = tx.Rollback()
		}
	}()
	for rows := batch; len(rows) > 0; {
		// Statements of a power of two rows (64, 32, ... 1) are prepared
		// once and reused: parsing one was a fifth of the writer's time.
		n := most
		for n > len(rows) {
			n /= 2
		}
		before()
		if tx == nil {
			var err error
			if tx, err = s.db.BeginTx(ctx, nil); err != nil {
				return fmt.Errorf("write activity: begin: %w", err)
			}
		}
		for i := range rows[:n] {
			r := &rows[i]
			r.Error = truncate(redact.Text(r.Error), MaxErrorLen)
			r.Reason = truncate(redact.Text(r.Reason), MaxErrorLen)
			// Subscribers get exactly what Get would return.
			r.Time = time.Unix(0, r.Time.UnixNano()).UTC()
			r.DurationMS = float64(durationUS(r.DurationMS)) / 1000
		}
		stmt, err := s.insertStmt(ctx, n)
		if err != nil {
			return err
		}
		if err := insertRecords(ctx, tx.Stmt(ctx, stmt), rows[:n], s.lastID); err != nil {
			return err
		}
		rows = rows[n:]
	}
	if tx == nil {
		return nil
	}
	floor, err := s.retire(ctx, tx, batch[len(batch)-1].ID, len(batch), step, before)
	if err != nil {
		return err
	}
	before()
	err = tx.Commit()
	tx = nil
	if err != nil {
		return fmt.Errorf("write activity: commit: %w", err)
	}
	s.floor.Store(floor)
	s.publish(batch)
	return nil
}

// retire deletes, in a batch's own transaction, the rows that the batch
// pushed past MaxRows (last is its newest id, added its size), in
// statements of at most step rows (0: one statement) with before() ahead
// of each, and returns the floor to keep once it commits. A full log so
// stays at its bound batch by batch: left to the periodic trim, it grew
// for a minute and then lost a minute's records at once, a burst of
// deletes (each an entry in up to five indexes) on the cores the calls
// use. A batch deletes at most twice its size; a larger backlog
// (max_rows lowered, say) is the periodic trim's.
func (s *Store) retire(ctx context.Context, tx *store.Tx, last int64, added, step int, before func()) (int64, error) {
	floor := s.floor.Load()
	cut := s.rowCut(last)
	if cut == 0 {
		return floor, nil
	}
	if floor == 0 {
		var low sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT min(id) FROM activity`).Scan(&low); err != nil {
			return 0, fmt.Errorf("write activity: retention: %w", err)
		}
		floor = low.Int64
	}
	if s.retireStmt == nil {
		st, err := s.db.PrepareContext(ctx, `DELETE FROM activity WHERE id <= ?`)
		if err != nil {
			return 0, fmt.Errorf("write activity: retention: %w", err)
		}
		s.retireStmt = st
	}
	stmt := tx.Stmt(ctx, s.retireStmt)
	for hi := min(cut, floor+2*int64(added)-1); floor <= hi; {
		to := hi
		if step > 0 {
			to = min(hi, floor+int64(step)-1)
		}
		before()
		if _, err := stmt.ExecContext(ctx, to); err != nil {
			return 0, fmt.Errorf("write activity: retention: %w", err)
		}
		floor = to + 1
	}
	return floor, nil
}

// rowCut is the newest id past the row bound (MaxRows) when newest is
// the newest row's, 0 when none is: ids only grow and old rows go first,
// so the rows above newest-MaxRows are the newest MaxRows (fewer if ids
// have gaps).
func (s *Store) rowCut(newest int64) int64 {
	if s.opts.MaxRows <= 0 || newest <= int64(s.opts.MaxRows) {
		return 0
	}
	return newest - int64(s.opts.MaxRows)
}

// insertRows is the most records one INSERT statement carries. A
// statement's own cost (parsing and binding it, and with PostgreSQL a
// round trip) is most of what a record costs when each has its own:
// 64 to a statement, SQLite stores about 40% more records per second
// and PostgreSQL about five times as many (BenchmarkIngest). Its 1,280
// parameters stay far under both engines' limits.
const insertRows = 64

// insertColumns are the columns a record fills, in insertRecords' order.
const insertColumns = `ts, server, tool, duration_us, status, error,
	error_class, fault_domain, upstream_http_status, request_id, client, protocol_era,
	reinit, retried, token_refresh, reason, replica, progress, inputs, method`

// rowParams are the placeholders of one record.
const rowParams = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

// insertStmt is the prepared INSERT of n rows.
func (s *Store) insertStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	if st := s.inserts[n]; st != nil {
		return st, nil
	}
	var q strings.Builder
	q.Grow(len(insertColumns) + 48 + n*(len(rowParams)+1))
	q.WriteString("INSERT INTO activity (" + insertColumns + ") VALUES ")
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(rowParams)
	}
	if !s.lastID {
		q.WriteString(" RETURNING id")
	}
	st, err := s.db.PrepareContext(ctx, q.String())
	if err != nil {
		return nil, fmt.Errorf("write activity: prepare: %w", err)
	}
	if s.inserts == nil {
		s.inserts = map[int]*sql.Stmt{}
	}
	s.inserts[n] = st
	return st, nil
}

// insertRecords inserts rows with stmt, an INSERT of as many rows, and
// sets their ids. SQLite gives a statement's rows consecutive ids (each
// the largest so far plus one, one writer at a time), so with lastID the
// last row's id names them all; RETURNING would make SQLite keep a
// result row for each. Otherwise the ids are RETURNed, in no promised
// order, but PostgreSQL's identity sequence also increases row by row in
// the order of the VALUES, so the ids, sorted, are the rows' in order.
func insertRecords(ctx context.Context, stmt *sql.Stmt, rows []Record, lastID bool) error {
	args := make([]any, 0, len(rows)*20)
	for i := range rows {
		r := &rows[i]
		args = append(args, r.Time.UnixNano(), r.Server, r.Tool, durationUS(r.DurationMS), r.Status, r.Error,
			r.ErrorClass, r.FaultDomain, r.UpstreamHTTPStatus, r.RequestID, r.Client, r.ProtocolEra,
			flag(r.Reinit), flag(r.Retried), flag(r.TokenRefresh), r.Reason, r.Replica, r.Progress, r.Inputs, r.Method)
	}
	if lastID {
		res, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("write activity: insert: %w", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("write activity: insert: %w", err)
		}
		for i := range rows {
			rows[i].ID = last - int64(len(rows)-1-i)
		}
		return nil
	}
	res, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("write activity: insert: %w", err)
	}
	defer res.Close()
	ids := make([]int64, 0, len(rows))
	for res.Next() {
		var id int64
		if err := res.Scan(&id); err != nil {
			return fmt.Errorf("write activity: insert: %w", err)
		}
		ids = append(ids, id)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("write activity: insert: %w", err)
	}
	if len(ids) != len(rows) {
		return fmt.Errorf("write activity: insert: %d ids for %d records", len(ids), len(rows))
	}
	slices.Sort(ids)
	for i := range rows {
		rows[i].ID = ids[i]
	}
	return nil
}

// durationUS is a duration in milliseconds as the whole microseconds
// stored.
func durationUS(ms float64) int64 { return int64(ms*1000 + 0.5) }

// flag stores a bool in an integer column, which both engines accept.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// trim deletes at most one batch of rows past the age or row bound and
// reports whether more remain.
func (s *Store) trim(ctx context.Context) (bool, error) {
	more := false
	if s.opts.MaxAge > 0 {
		cutoff := s.opts.Now().Add(-s.opts.MaxAge).UnixNano()
		res, err := s.db.ExecContext(ctx, `DELETE FROM activity WHERE id IN
			(SELECT id FROM activity WHERE ts < ? ORDER BY ts LIMIT ?)`, cutoff, retentionBatch)
		if err != nil {
			return false, fmt.Errorf("activity retention by age: %w", err)
		}
		if n, _ := res.RowsAffected(); n == retentionBatch {
			more = true
		}
	}
	if s.opts.MaxRows > 0 {
		var maxID sql.NullInt64
		if err := s.db.QueryRowContext(ctx, `SELECT max(id) FROM activity`).Scan(&maxID); err != nil {
			return false, fmt.Errorf("activity retention by rows: %w", err)
		}
		if cut := s.rowCut(maxID.Int64); cut > 0 {
			res, err := s.db.ExecContext(ctx, `DELETE FROM activity WHERE id IN
				(SELECT id FROM activity WHERE id <= ? ORDER BY id LIMIT ?)`, cut, retentionBatch)
			if err != nil {
				return false, fmt.Errorf("activity retention by rows: %w", err)
			}
			if n, _ := res.RowsAffected(); n == retentionBatch {
				more = true
			}
		}
	}
	s.floor.Store(0)
	return more, nil
}
