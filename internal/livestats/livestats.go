// Package livestats keeps a rolling window of tool-call outcomes per
// server, in time buckets, for live views: calls per second, errors by
// class and fault domain, latency percentiles and a per-bucket series for
// sparklines. Memory is bounded by the number of servers and buckets.
package livestats

import (
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/chart"
)

// Call is one finished tool call, as the activity stream reports it.
type Call struct {
	ID           int64
	Time         time.Time
	Server       string
	DurationMS   float64
	Failed       bool
	ErrorClass   string
	FaultDomain  string
	Reinit       bool
	TokenRefresh bool
}

// samplesPerBucket bounds the latencies kept per bucket: beyond it a
// reservoir keeps a uniform sample, so percentiles stay honest at any rate.
const samplesPerBucket = 512

// Window is a rolling window of calls per server. It is safe for
// concurrent use.
type Window struct {
	bucket time.Duration
	n      int // buckets in the window

	mu      sync.Mutex
	servers map[string]*series
	rng     *rand.Rand
}

type series struct {
	buckets []bucket // ring indexed by slot
}

type bucket struct {
	slot      int64 // unix time / bucket width: which bucket this is
	calls     int
	seen      int // latencies offered to the reservoir
	latencies []float64
	failed    map[key]int // by class and domain
	reinits   int
	refreshes int
}

type key struct{ class, domain string }

// New returns a window of span divided into buckets of width bucket.
func New(span, bucketWidth time.Duration) *Window {
	n := max(int(span/bucketWidth), 1)
	return &Window{bucket: bucketWidth, n: n, servers: map[string]*series{}, rng: rand.New(rand.NewPCG(1, 2))}
}

// Buckets is the number of buckets in the window.
func (w *Window) Buckets() int { return w.n }

// BucketWidth is the width of one bucket.
func (w *Window) BucketWidth() time.Duration { return w.bucket }

// Add records a call.
func (w *Window) Add(c Call) {
	slot := c.Time.UnixNano() / int64(w.bucket)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.servers[c.Server]
	if s == nil {
		s = &series{buckets: make([]bucket, w.n)}
		w.servers[c.Server] = s
	}
	b := &s.buckets[int(slot%int64(w.n))]
	if b.slot != slot {
		if b.slot > slot {
			return // older than the window
		}
		*b = bucket{slot: slot}
	}
	b.calls++
	b.seen++
	if len(b.latencies) < samplesPerBucket {
		b.latencies = append(b.latencies, c.DurationMS)
	} else if i := w.rng.IntN(b.seen); i < samplesPerBucket {
		b.latencies[i] = c.DurationMS
	}
	if c.Failed {
		if b.failed == nil {
			b.failed = map[key]int{}
		}
		b.failed[key{c.ErrorClass, c.FaultDomain}]++
	}
	if c.Reinit {
		b.reinits++
	}
	if c.TokenRefresh {
		b.refreshes++
	}
}

// Stats are one server's figures over the window.
type Stats struct {
	Server     string
	Calls      int
	Failed     int // failures in the chosen fault domain (all without one)
	PerSecond  float64
	FailedBy   map[string]int // by error class
	P50MS      float64
	P99MS      float64
	P99Series  []float64 // p99 latency per bucket, oldest first (0 where no call)
	CallSeries []float64 // calls per bucket, oldest first
	Reinits    int
	Refreshes  int
	ByDomain   map[string]int // failures by fault domain, whatever the filter
}

// rateSpan is the stretch calls per second are measured over: recent
// enough to follow a change, long enough to be steady.
const rateSpan = time.Minute

// Snapshot returns every server's stats at now; domain, when set, counts
// only failures of that fault domain. Servers are sorted by name.
func (w *Window) Snapshot(now time.Time, domain string) []Stats {
	cur := now.UnixNano() / int64(w.bucket)
	oldest := cur - int64(w.n) + 1
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Stats, 0, len(w.servers))
	for name, s := range w.servers {
		st := Stats{Server: name, FailedBy: map[string]int{}, ByDomain: map[string]int{},
			P99Series: make([]float64, w.n), CallSeries: make([]float64, w.n)}
		var all []float64
		rateFrom := cur - int64(max(min(int(rateSpan/w.bucket), w.n), 1)) + 1
		recent := 0
		for _, b := range s.buckets {
			if b.slot < oldest || b.slot > cur || b.calls == 0 {
				continue
			}
			i := int(b.slot - oldest)
			st.Calls += b.calls
			st.CallSeries[i] = float64(b.calls)
			lat := slices.Clone(b.latencies)
			sort.Float64s(lat)
			st.P99Series[i] = chart.Percentile(lat, 0.99)
			all = append(all, lat...)
			for k, n := range b.failed {
				st.ByDomain[k.domain] += n
				if domain == "" || k.domain == domain {
					st.Failed += n
					st.FailedBy[k.class] += n
				}
			}
			st.Reinits += b.reinits
			st.Refreshes += b.refreshes
			if b.slot >= rateFrom {
				recent += b.calls
			}
		}
		if st.Calls == 0 {
			continue
		}
		sort.Float64s(all)
		st.P50MS = chart.Percentile(all, 0.50)
		st.P99MS = chart.Percentile(all, 0.99)
		span := time.Duration(cur-rateFrom+1) * w.bucket
		st.PerSecond = float64(recent) / span.Seconds()
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}
