package activity

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// eachEngine runs fn against a new database of every state engine.
func eachEngine(t *testing.T, fn func(t *testing.T, eng string)) {
	for _, eng := range storetest.Engines {
		t.Run(eng, func(t *testing.T) { fn(t, eng) })
	}
}

func openDB(t testing.TB, eng string) *store.DB {
	t.Helper()
	return storetest.Open(t, eng)
}

func newStore(t testing.TB, eng string, opts Options) *Store {
	t.Helper()
	s := NewStore(openDB(t, eng), opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func flush(t testing.TB, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // generous: a loaded 2-core machine
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// sample is a small mixed log, one call a second from t0.
func sample() []Record {
	mk := func(i int, server, tool, class, domain string, status int) Record {
		r := Record{Time: t0.Add(time.Duration(i) * time.Second), Server: server, Tool: tool, DurationMS: 1.5, Status: api.StatusOK}
		if class != "" {
			r.Status, r.ErrorClass, r.FaultDomain, r.UpstreamHTTPStatus, r.Error = api.StatusError, class, domain, status, "failed: "+class
		}
		return r
	}
	return []Record{
		mk(0, "docs", "search", "", "", 0),
		mk(1, "docs", "search", callerr.ClassHTTP, callerr.DomainUpstream, 502),
		mk(2, "docs", "fetch", callerr.ClassToolError, callerr.DomainUpstream, 0),
		mk(3, "git", "log", "", "", 0),
		mk(4, "git", "log", callerr.ClassProxyPolicy, callerr.DomainProxy, 0),
		mk(5, "git", "push", callerr.ClassCancelled, callerr.DomainClient, 0),
		mk(6, "docs", "search", callerr.ClassTimeout, callerr.DomainUpstream, 0),
	}
}

func TestAddListGet(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		in := sample()
		in[1].Error = "upstream said \x1b[31mAuthorization: Bearer sekr1t-token-value"
		in[1].Status = "" // derived from the error class
		in[1].Reinit, in[1].Retried, in[1].TokenRefresh = true, true, true
		in[1].RequestID, in[1].Client, in[1].ProtocolEra = "req-7", "session-abc", "legacy"
		in[1].Reason = "HTTP 502 recorded at the transport with an HTML body"
		for _, r := range in {
			s.Add(r)
		}
		flush(t, s)

		got, err := s.List(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(in) {
			t.Fatalf("List returned %d records, want %d", len(got), len(in))
		}
		for i := 1; i < len(got); i++ {
			if got[i-1].Time.Before(got[i].Time) {
				t.Fatalf("not newest first: %v before %v", got[i-1].Time, got[i].Time)
			}
		}
		r, err := s.Get(context.Background(), got[len(got)-2].ID)
		if err != nil {
			t.Fatal(err)
		}
		want := in[1]
		want.ID = r.ID
		want.Status = api.StatusError
		want.Error = "upstream said Authorization: Bearer [REDACTED]"
		if r != want {
			t.Errorf("Get = %+v\nwant  %+v", r, want)
		}
		if _, err := s.Get(context.Background(), 9999); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(unknown) error = %v, want ErrNotFound", err)
		}
	})
}

func TestFilters(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		for _, r := range sample() {
			s.Add(r)
		}
		flush(t, s)
		all, err := s.List(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name  string
			f     Filter
			tools []string // expected, newest first
		}{
			{"everything", Filter{}, []string{"search", "push", "log", "log", "fetch", "search", "search"}},
			{"server", Filter{Servers: []string{"git"}}, []string{"push", "log", "log"}},
			{"two servers", Filter{Servers: []string{"git", "docs"}, Limit: 2}, []string{"search", "push"}},
			{"tool", Filter{Tools: []string{"search"}}, []string{"search", "search", "search"}},
			{"status", Filter{Statuses: []string{api.StatusOK}}, []string{"log", "search"}},
			{"upstream fault", Filter{FaultDomains: []string{callerr.DomainUpstream}}, []string{"search", "fetch", "search"}},
			{"class", Filter{ErrorClasses: []string{callerr.ClassHTTP, callerr.ClassCancelled}}, []string{"push", "search"}},
			{"since", Filter{Since: t0.Add(5 * time.Second)}, []string{"search", "push"}},
			{"until", Filter{Until: t0.Add(1 * time.Second)}, []string{"search", "search"}},
			{"window and domain", Filter{Since: t0.Add(2 * time.Second), Until: t0.Add(5 * time.Second), FaultDomains: []string{"upstream"}}, []string{"fetch"}},
			{"after id", Filter{AfterID: all[1].ID}, []string{"search"}},
			{"limit", Filter{Limit: 1}, []string{"search"}},
			{"no match", Filter{Servers: []string{"nope"}}, []string{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.List(context.Background(), tt.f)
				if err != nil {
					t.Fatal(err)
				}
				var tools []string
				for _, r := range got {
					tools = append(tools, r.Tool)
					if !tt.f.Match(r) {
						t.Errorf("List returned %+v that Match rejects", r)
					}
				}
				if !slices.Equal(tools, tt.tools) && !(len(tools) == 0 && len(tt.tools) == 0) {
					t.Errorf("tools = %v, want %v", tools, tt.tools)
				}
				// Match agrees with the SQL filter on every record.
				n := 0
				for _, r := range all {
					if tt.f.Match(r) {
						n++
					}
				}
				if tt.f.Limit == 0 && n != len(got) {
					t.Errorf("Match accepts %d records, List returned %d", n, len(got))
				}
			})
		}
	})
}

func TestExportOldestFirstAcrossPages(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{BatchSize: 300})
		const n = 2*exportPage + 37
		for i := range n {
			// Many records share a timestamp, so paging must order by id too.
			s.Add(Record{Time: t0.Add(time.Duration(i/7) * time.Millisecond), Server: "docs", Tool: fmt.Sprint(i), Status: api.StatusOK})
		}
		flush(t, s)

		tests := []struct {
			name  string
			f     Filter
			count int
		}{
			{"all", Filter{}, n},
			{"limit inside a page", Filter{Limit: 10}, 10},
			{"limit across pages", Filter{Limit: exportPage + 3}, exportPage + 3},
			{"filtered", Filter{Since: t0.Add(100 * time.Millisecond)}, n - 700},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got []Record
				err := s.Export(context.Background(), tt.f, func(r Record) error {
					got = append(got, r)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.count {
					t.Fatalf("exported %d, want %d", len(got), tt.count)
				}
				for i := 1; i < len(got); i++ {
					if got[i].ID <= got[i-1].ID {
						t.Fatalf("not oldest first at %d: id %d after %d", i, got[i].ID, got[i-1].ID)
					}
				}
			})
		}
		stop := errors.New("stop")
		calls := 0
		err := s.Export(context.Background(), Filter{}, func(Record) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Errorf("Export with failing fn: err %v after %d calls", err, calls)
		}
	})
}

func TestSummary(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		for _, r := range sample() {
			s.Add(r)
		}
		flush(t, s)
		row := func(key string, calls, failed int, rate float64) SummaryRow {
			return SummaryRow{Key: key, Calls: calls, Failed: failed, FailureRate: rate}
		}
		tests := []struct {
			by   string
			want []SummaryRow
		}{
			{"server", []SummaryRow{row("docs", 4, 3, 0.75), row("git", 3, 2, 2.0/3)}},
			{"tool", []SummaryRow{row("search", 3, 2, 2.0/3), row("log", 2, 1, 0.5), row("fetch", 1, 1, 1), row("push", 1, 1, 1)}},
			{"fault_domain", []SummaryRow{row("upstream", 3, 3, 1), row("", 2, 0, 0), row("client", 1, 1, 1), row("proxy", 1, 1, 1)}},
			{"error_class", []SummaryRow{row("", 2, 0, 0), row("cancelled", 1, 1, 1), row("http", 1, 1, 1), row("proxy_policy", 1, 1, 1), row("timeout", 1, 1, 1), row("tool_error", 1, 1, 1)}},
		}
		for _, tt := range tests {
			t.Run(tt.by, func(t *testing.T) {
				got, err := s.Summary(context.Background(), Filter{}, tt.by)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("Summary(%s) = %v, want %v", tt.by, got, tt.want)
				}
			})
		}
		got, err := s.Summary(context.Background(), Filter{Since: t0.Add(4 * time.Second)}, "server")
		if err != nil || !slices.Equal(got, []SummaryRow{row("git", 2, 2, 1), row("docs", 1, 1, 1)}) {
			t.Errorf("filtered summary = %v, %v", got, err)
		}
		if _, err := s.Summary(context.Background(), Filter{}, "status; DROP TABLE activity"); !errors.Is(err, ErrBadGroup) {
			t.Errorf("bad grouping error = %v", err)
		}
	})
}

func TestSubscribe(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{FlushInterval: time.Millisecond})
		upstream, cancelUp := s.Subscribe(Filter{FaultDomains: []string{callerr.DomainUpstream}})
		all, cancelAll := s.Subscribe(Filter{})
		defer cancelAll()
		for _, r := range sample() {
			s.Add(r)
		}
		var got []Record
		timeout := time.After(10 * time.Second)
		for len(got) < 3 {
			select {
			case r := <-upstream:
				got = append(got, r)
			case <-timeout:
				t.Fatalf("got %d upstream records, want 3", len(got))
			}
		}
		for _, r := range got {
			if r.ID == 0 || r.FaultDomain != callerr.DomainUpstream {
				t.Errorf("live record %+v lacks an id or is not upstream", r)
			}
			stored, err := s.Get(context.Background(), r.ID)
			if err != nil || stored != r {
				t.Errorf("live record %+v differs from stored %+v (%v)", r, stored, err)
			}
		}
		cancelUp()
		cancelUp() // idempotent
		if _, ok := <-upstream; ok {
			t.Error("channel still open after cancel")
		}
		for i := range len(sample()) {
			select {
			case <-all:
			case <-timeout:
				t.Fatalf("all-subscriber got %d records", i)
			}
		}
	})
}

// A subscriber that never reads loses records; the writer goes on.
func TestSlowSubscriberDoesNotBlockWriter(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		_, cancel := s.Subscribe(Filter{})
		defer cancel()
		const n = SubscriberBuffer + 50
		for i := range n {
			s.Add(Record{Time: t0.Add(time.Duration(i)), Server: "a", Tool: "t", Status: api.StatusOK})
		}
		flush(t, s)
		if got := s.SubscriberDropped(); got != 50 {
			t.Errorf("SubscriberDropped = %d, want 50", got)
		}
		got, err := s.List(context.Background(), Filter{Limit: n})
		if err != nil || len(got) != n {
			t.Errorf("stored %d records, %v; want %d", len(got), err, n)
		}
	})
}

// With the database locked by someone else, Add still returns promptly and
// counts what it had to drop.
func TestAddNeverBlocksOnDisk(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		db := openDB(t, eng)
		s := NewStore(db, Options{QueueSize: 4, BatchSize: 2, FlushInterval: time.Millisecond})
		defer s.Close()

		release := lockActivity(t, db)
		// Add blocking on the locked database would hang here (and fail by
		// the test timeout); it must drop and count instead.
		const n = 200
		for i := range n {
			s.Add(Record{Time: t0.Add(time.Duration(i)), Server: "a", Tool: "t", Status: api.StatusOK})
		}
		if s.Dropped() == 0 {
			t.Error("no drops counted with a full queue")
		}
		release()
		flush(t, s)
		got, err := s.List(context.Background(), Filter{Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(got))+s.Dropped() != n {
			t.Errorf("stored %d + dropped %d != added %d", len(got), s.Dropped(), n)
		}
	})
}

func TestCloseWritesQueued(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		db := openDB(t, eng)
		s := NewStore(db, Options{FlushInterval: time.Hour})
		for _, r := range sample() {
			s.Add(r)
		}
		sub, _ := s.Subscribe(Filter{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s.Add(sample()[0])
		if s.Dropped() != 1 {
			t.Errorf("Add after Close: Dropped = %d, want 1", s.Dropped())
		}
		if err := s.Flush(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Flush after Close = %v", err)
		}
		for range sub {
		} // closed by Close
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM activity").Scan(&n); err != nil || n != len(sample()) {
			t.Errorf("rows after Close = %d, %v; want %d", n, err, len(sample()))
		}
	})
}

func TestRetention(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		now := t0.Add(48 * time.Hour)
		tests := []struct {
			name      string
			opts      Options
			records   int
			remaining int
		}{
			{"by age", Options{MaxAge: 24 * time.Hour, MaxRows: -1}, 3000, 0},
			{"by rows", Options{MaxAge: -1, MaxRows: 100}, 2500, 100},
			{"age tighter than rows", Options{MaxAge: 48*time.Hour - 500*time.Second, MaxRows: 2800}, 3000, 2500},
			{"rows tighter than age", Options{MaxAge: 48*time.Hour - 500*time.Second, MaxRows: 2000}, 3000, 2000},
			{"disabled", Options{MaxAge: -1, MaxRows: -1}, 500, 500},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				tt.opts.Now = func() time.Time { return now }
				tt.opts.RetentionInterval = time.Hour // trimmed by hand below
				s := newStore(t, eng, tt.opts)
				flush(t, s)
				for i := range tt.records {
					// One a second from t0, the oldest first.
					s.Add(Record{Time: t0.Add(time.Duration(i) * time.Second), Server: "a", Tool: "t", Status: api.StatusOK})
				}
				flush(t, s)
				for range 100 {
					more, err := s.trim(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if !more {
						break
					}
				}
				// The writer's own start-up trim may run after the records
				// are in, alongside the trims above: a trim that meets one
				// under way finds its rows gone and reports no more, and
				// the writer's trim goes on, a batch each 10 ms.
				waitfor.Cond(t, 10*time.Second, fmt.Sprintf("%d rows to remain", tt.remaining), func() (bool, string) {
					var n int
					if err := s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM activity").Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n == tt.remaining, fmt.Sprintf("%d rows remain", n)
				})
			})
		}
	})
}

// The writer trims on its own schedule, a batch at a time.
func TestRetentionRunsPeriodically(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{MaxAge: -1, MaxRows: 10, RetentionInterval: 5 * time.Millisecond})
		for i := range 2500 {
			s.Add(Record{Time: t0.Add(time.Duration(i)), Server: "a", Tool: "t", Status: api.StatusOK})
		}
		flush(t, s)
		waitfor.Cond(t, 10*time.Second, "retention to leave 10 rows", func() (bool, string) {
			var n int
			if err := s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM activity").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 10, fmt.Sprintf("%d rows", n)
		})
	})
}

// A log at its row bound stays there batch by batch: each batch deletes
// the records it pushed out, in its own transaction, instead of the log
// growing until the periodic trim deletes a minute's records at once.
func TestRetentionKeepsTheBoundBatchByBatch(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		const bound = 100
		s := newStore(t, eng, Options{MaxAge: -1, MaxRows: bound, RetentionInterval: time.Hour})
		added := 0
		for batch := range 12 {
			// Batches of 1 to 56 records: one at a time, and over half the bound.
			for range 1 + batch*5 {
				s.Add(Record{Time: t0.Add(time.Duration(added) * time.Second), Server: "a", Tool: "t", Status: api.StatusOK})
				added++
			}
			flush(t, s)
			var n int
			var oldest, newest int64
			if err := s.db.QueryRowContext(context.Background(), "SELECT count(*), min(id), max(id) FROM activity").Scan(&n, &oldest, &newest); err != nil {
				t.Fatal(err)
			}
			if want := min(added, bound); n != want || newest-oldest+1 != int64(n) {
				t.Fatalf("after %d records: %d rows, ids %d to %d; want the newest %d", added, n, oldest, newest, want)
			}
		}
	})
}

// A database written by the first schema (activity without the taxonomy
// columns) still reads after migration.
func TestReadsVersion1Records(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpx.db")
	old, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE activity (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL,
			duration_us INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, error TEXT NOT NULL DEFAULT '')`,
		fmt.Sprintf(`INSERT INTO activity (ts, server, tool, duration_us, status, error) VALUES
			(%d, 'docs', 'search', 2500, 'ok', ''), (%d, 'docs', 'fetch', 100, 'error', 'request failed with status 502')`,
			t0.UnixNano(), t0.Add(time.Second).UnixNano()),
		`PRAGMA user_version = 1`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close()

	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db, Options{MaxAge: -1})
	defer s.Close()
	got, err := s.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{ID: 2, Time: t0.Add(time.Second), Server: "docs", Tool: "fetch", DurationMS: 0.1, Status: api.StatusError, Error: "request failed with status 502"},
		{ID: 1, Time: t0, Server: "docs", Tool: "search", DurationMS: 2.5, Status: api.StatusOK},
	}
	if !slices.Equal(got, want) {
		t.Errorf("List = %+v\nwant %+v", got, want)
	}
	s.Add(Record{Server: "docs", Tool: "new", Status: api.StatusError, ErrorClass: callerr.ClassHTTP, FaultDomain: callerr.DomainUpstream})
	flush(t, s)
	up, err := s.List(context.Background(), Filter{FaultDomains: []string{callerr.DomainUpstream}})
	if err != nil || len(up) != 1 || up[0].Tool != "new" {
		t.Errorf("upstream filter after migration = %+v, %v", up, err)
	}
}

func TestConcurrentAdd(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 250 {
					s.Add(Record{Server: fmt.Sprint("s", g), Tool: fmt.Sprint(i), Status: api.StatusOK})
				}
			}()
		}
		wg.Wait()
		flush(t, s)
		rows, err := s.Summary(context.Background(), Filter{}, "server")
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, r := range rows {
			total += r.Calls
		}
		if total+int(s.Dropped()) != 2000 {
			t.Errorf("stored %d + dropped %d, want 2000", total, s.Dropped())
		}
	})
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", MaxErrorLen)
	got := truncate(long, MaxErrorLen)
	if len(got) > MaxErrorLen+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("truncate gave %d bytes", len(got))
	}
	if strings.ContainsRune(strings.TrimSuffix(got, "…"), '\uFFFD') {
		t.Error("cut inside a rune")
	}
}

// A record's names are stored cut to MaxNameLen, its texts to
// MaxErrorLen: a client naming a tool of megabytes does not grow the log
// (or the queue) by as much.
func TestLongNamesAndTextsCut(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{})
		huge := strings.Repeat("A", 1<<20)
		s.Add(Record{Server: "fx", Tool: "fx__" + huge, Method: huge, RequestID: huge, Client: huge,
			ErrorClass: "proxy_policy", Error: huge, Reason: huge})
		flush(t, s)
		got, err := s.List(context.Background(), Filter{})
		if err != nil || len(got) != 1 {
			t.Fatalf("List = %d records, %v", len(got), err)
		}
		r := got[0]
		for name, v := range map[string]struct {
			s   string
			max int
		}{"tool": {r.Tool, MaxNameLen}, "method": {r.Method, MaxNameLen}, "request id": {r.RequestID, MaxNameLen},
			"client": {r.Client, MaxNameLen}, "error": {r.Error, MaxErrorLen}, "reason": {r.Reason, MaxErrorLen}} {
			if len(v.s) > v.max+len("…") || !strings.HasSuffix(v.s, "…") {
				t.Errorf("%s stored as %d bytes, want at most %d and cut", name, len(v.s), v.max)
			}
		}
		if !strings.HasPrefix(r.Tool, "fx__AAA") {
			t.Errorf("tool stored as %.20q…", r.Tool)
		}
	})
}

// A batch that cannot be written is reported by Flush and counted as dropped.
func TestWriteFailure(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		db := openDB(t, eng)
		s := NewStore(db, Options{})
		defer s.Close()
		flush(t, s)
		db.Close()
		s.Add(sample()[0])
		if err := s.Flush(context.Background()); err == nil {
			t.Fatal("Flush succeeded on a closed database")
		}
		if s.Dropped() != 1 || s.WriteErrors() != 1 || s.LastError() == nil {
			t.Errorf("dropped %d, write errors %d, last %v", s.Dropped(), s.WriteErrors(), s.LastError())
		}
	})
}

func TestSubscribeAfterClose(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := NewStore(openDB(t, eng), Options{})
		s.Close()
		ch, cancel := s.Subscribe(Filter{})
		defer cancel()
		if _, ok := <-ch; ok {
			t.Error("subscription after Close is open")
		}
	})
}

// lockActivity blocks every write to the activity table from another
// connection until release.
func lockActivity(t *testing.T, db *store.DB) (release func()) {
	t.Helper()
	ctx := context.Background()
	var conn *sql.Conn
	var begin []string
	if db.Engine() == store.EnginePostgres {
		c, err := db.SQL().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conn = c
		begin = []string{"BEGIN", "LOCK TABLE activity IN ACCESS EXCLUSIVE MODE"}
	} else {
		lock, err := sql.Open("sqlite", db.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lock.Close() })
		if conn, err = lock.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		// The store's writer may hold the write lock this instant: wait for it.
		begin = []string{"PRAGMA busy_timeout = 10000", "BEGIN IMMEDIATE"}
	}
	for _, q := range begin {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
}

// While a batch waits for its flush interval the writer leaves the
// records after its first in the queue (one wake-up per batch, not per
// record); a flush, and a queue filling up, still get it at once.
func TestOpenBatchYieldsToFlushAndFullQueue(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{QueueSize: 16, BatchSize: 512, FlushInterval: time.Hour})
		const n = 200
		for i := range n {
			s.Add(Record{Time: t0.Add(time.Duration(i)), Server: "a", Tool: "t", Status: api.StatusOK})
		}
		// Without the writer taking the queue, all but the first 16 would
		// be dropped; a loaded machine may drop a few (Add waits 5 ms).
		if d := s.Dropped(); d > n/4 {
			t.Fatalf("%d of %d records dropped: the writer did not take a filling queue during an open batch", d, n)
		}
		flush(t, s) // an hour's batch: fails by its timeout unless the flush wakes the writer
		got, err := s.List(context.Background(), Filter{Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(got))+s.Dropped() != n {
			t.Fatalf("%d records after Flush and %d dropped, want %d in all", len(got), s.Dropped(), n)
		}
	})
}

// A batch is written with multi-row statements (insertRows to one); each
// record must get its own row's id, across the statements of a batch.
func TestBatchIDsFollowAddOrder(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{FlushInterval: time.Hour})
		live, cancel := s.Subscribe(Filter{})
		defer cancel()
		const n = 2*insertRows + 7 // three statements, the last one short
		for i := range n {
			s.Add(Record{Time: t0.Add(time.Duration(i) * time.Millisecond), Server: "docs", Tool: fmt.Sprintf("tool-%03d", i),
				RequestID: fmt.Sprintf("req-%03d", i), DurationMS: float64(i) + 0.25, Progress: i})
		}
		flush(t, s)
		var prev int64
		for i := range n {
			var r Record
			select {
			case r = <-live:
			case <-time.After(10 * time.Second):
				t.Fatalf("got %d live records, want %d", i, n)
			}
			if want := fmt.Sprintf("req-%03d", i); r.RequestID != want || r.ID <= prev {
				t.Fatalf("record %d: request %s id %d after id %d, want %s with a higher id", i, r.RequestID, r.ID, prev, want)
			}
			prev = r.ID
			stored, err := s.Get(context.Background(), r.ID)
			if err != nil || stored != r {
				t.Fatalf("record %d: live %+v, stored under its id %+v (%v)", i, r, stored, err)
			}
		}
	})
}

// TestToolCallsEnded: the health window's replay counts tool calls by
// replica, server, outcome and the slot their end falls in, of the
// replicas named.
func TestToolCallsEnded(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := newStore(t, eng, Options{Replica: "a"})
		mk := func(at time.Duration, server, class, domain, method, replica string, dur time.Duration) Record {
			return Record{Time: t0.Add(at), Server: server, Tool: "x", Status: api.StatusOK, ErrorClass: class, FaultDomain: domain,
				Method: method, Replica: replica, DurationMS: float64(dur.Microseconds()) / 1000}
		}
		for _, r := range []Record{
			mk(-time.Minute, "docs", "", "", "", "", time.Millisecond), // before since
			mk(0, "docs", "", "", "", "", time.Millisecond),
			mk(time.Second, "docs", "", "", "", "", time.Millisecond),
			mk(2*time.Second, "docs", callerr.ClassHTTP, callerr.DomainUpstream, "", "", time.Millisecond),
			mk(3*time.Second, "docs", "", "", "", "", 25*time.Second),                                       // ends two slots on
			mk(4*time.Second, "docs", "", "", "resources/read", "", time.Millisecond),                       // not a tool call
			mk(5*time.Second, "docs", callerr.ClassHTTP, callerr.DomainUpstream, "", "b", time.Millisecond), // another replica
		} {
			s.Add(r)
		}
		flush(t, s)
		got, err := s.ToolCallsEnded(context.Background(), t0, 10*time.Second, "a")
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b EndedCount) int {
			return cmp.Or(a.End.Compare(b.End), strings.Compare(a.ErrorClass, b.ErrorClass))
		})
		want := []EndedCount{
			{Replica: "a", Server: "docs", End: t0, Calls: 2},
			{Replica: "a", Server: "docs", ErrorClass: callerr.ClassHTTP, FaultDomain: callerr.DomainUpstream, End: t0, Calls: 1},
			{Replica: "a", Server: "docs", End: t0.Add(20 * time.Second), Calls: 1},
		}
		if len(got) != len(want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		for i := range want {
			if !sameCount(got[i], want[i]) {
				t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		// Unfiltered, the other replica's call is a row of its own.
		all, err := s.ToolCallsEnded(context.Background(), t0, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var theirs []EndedCount
		for _, c := range all {
			if c.Replica != "a" {
				theirs = append(theirs, c)
			}
		}
		other := EndedCount{Replica: "b", Server: "docs", ErrorClass: callerr.ClassHTTP, FaultDomain: callerr.DomainUpstream, End: t0, Calls: 1}
		if len(all) != len(want)+1 || len(theirs) != 1 || !sameCount(theirs[0], other) {
			t.Errorf("unfiltered: got %+v, want replica a's rows and %+v", all, other)
		}
	})
}

func sameCount(a, b EndedCount) bool {
	return a.Replica == b.Replica && a.Server == b.Server && a.ErrorClass == b.ErrorClass && a.FaultDomain == b.FaultDomain &&
		a.End.Equal(b.End) && a.Calls == b.Calls
}
