package activity

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

// The filters the CLI offers are answered from an index, newest first,
// without a sort.
func TestQueryPlansUseIndexes(t *testing.T) {
	db := openDB(t, store.EngineSQLite)
	since := time.Now().Add(-24 * time.Hour)
	tests := []struct {
		name  string
		f     Filter
		index string
	}{
		{"fault domain since", Filter{FaultDomains: []string{callerr.DomainUpstream}, Since: since, Limit: 100}, "activity_domain_ts"},
		{"error class", Filter{ErrorClasses: []string{callerr.ClassHTTP}, Limit: 100}, "activity_class_ts"},
		{"server since", Filter{Servers: []string{"docs"}, Since: since}, "activity_server_ts"},
		{"since only", Filter{Since: since}, "activity_ts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, args := listQuery(tt.f)
			rows, err := db.SQL().Query("EXPLAIN QUERY PLAN "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			p := strings.Join(plan, "; ")
			if !strings.Contains(p, tt.index) || strings.Contains(p, "TEMP B-TREE") {
				t.Errorf("plan %q: want index %s and no sort", p, tt.index)
			}
		})
	}
}

// BenchmarkIngest measures how fast the writer stores records, on each
// engine (the queue is sized so none are dropped): into a log that grows,
// and into a full one (-full), where each batch also deletes as many
// records as it adds.
func BenchmarkIngest(b *testing.B) {
	const bound = 10_000
	for _, eng := range storetest.Engines {
		for _, full := range []bool{false, true} {
			name := eng
			if full {
				name += "-full"
			}
			b.Run(name, func(b *testing.B) { ingest(b, eng, full, bound) })
		}
	}
}

func ingest(b *testing.B, eng string, full bool, bound int) {
	opts := Options{QueueSize: b.N + bound + 1, MaxAge: -1, MaxRows: -1}
	if full {
		opts.MaxRows = bound
	}
	s := NewStore(openDB(b, eng), opts)
	defer s.Close()
	r := Record{Server: "docs", Tool: "search", DurationMS: 12.5, Status: api.StatusError, Error: "request failed with status 502",
		ErrorClass: callerr.ClassHTTP, FaultDomain: callerr.DomainUpstream, UpstreamHTTPStatus: 502, RequestID: "req-1", Client: "session-1"}
	if full {
		for range bound {
			s.Add(r)
		}
		if err := s.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		s.Add(r)
	}
	if err := s.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if s.Dropped() != 0 {
		b.Fatalf("%d records dropped", s.Dropped())
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	if full {
		var n int
		if err := s.db.QueryRowContext(context.Background(), "SELECT count(*) FROM activity").Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != bound {
			b.Fatalf("%d records kept, want the bound (%d)", n, bound)
		}
	}
}

const benchRows = 1_000_000

// BenchmarkFilteredQuery is `mcpx activity --fault-domain upstream --since
// 24h --limit 100` over a million records spread across 30 days.
func BenchmarkFilteredQuery(b *testing.B) {
	db := openDB(b, store.EngineSQLite)
	now := time.Now()
	span := int64(30 * 24 * time.Hour)
	// One statement builds the table: a quarter of the calls fail, spread
	// across the three fault domains.
	_, err := db.SQL().Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO activity (ts, server, tool, duration_us, status, error, error_class, fault_domain, upstream_http_status)
		SELECT ? - i * ?, 'server' || (i % 20), 'tool' || (i % 50), 1000 + i % 5000,
			CASE WHEN i % 4 = 0 THEN 'error' ELSE 'ok' END,
			CASE WHEN i % 4 = 0 THEN 'request failed' ELSE '' END,
			CASE WHEN i % 4 != 0 THEN '' WHEN (i / 4) % 3 = 0 THEN 'http' WHEN (i / 4) % 3 = 1 THEN 'proxy_policy' ELSE 'cancelled' END,
			CASE WHEN i % 4 != 0 THEN '' WHEN (i / 4) % 3 = 0 THEN 'upstream' WHEN (i / 4) % 3 = 1 THEN 'proxy' ELSE 'client' END,
			CASE WHEN i % 4 = 0 AND (i / 4) % 3 = 0 THEN 502 ELSE 0 END
		FROM n`, benchRows-1, now.UnixNano(), span/benchRows)
	if err != nil {
		b.Fatal(err)
	}
	s := NewStore(db, Options{MaxAge: -1, MaxRows: -1})
	defer s.Close()
	f := Filter{FaultDomains: []string{callerr.DomainUpstream}, Since: now.Add(-24 * time.Hour), Limit: 100}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		got, err := s.List(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != 100 {
			b.Fatalf("got %d records", len(got))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
}
