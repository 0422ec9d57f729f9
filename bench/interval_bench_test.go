package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// paired are a paired measurement's samples by path and round: in round
// n one client called every path once, in a shuffled order (latencies).
type paired [][]sample

// timings are each path's latencies, sorted (its failed calls left out).
func (p paired) timings() []timings {
	lat := make([]timings, len(p))
	for i := range p {
		for _, s := range p[i] {
			lat[i].add(s)
		}
		slices.Sort(lat[i])
	}
	return lat
}

// bootstrapDraws is the number of resamples an interval is taken over.
const bootstrapDraws = 200

// span is a ratio's 90% interval: the 5th and 95th percentiles of the
// ratio over the draws. A draw in which the reverse proxy added nothing
// has no ratio and counts as unbounded (+Inf).
type span struct{ lo, hi float64 }

// addedIntervals are the paired added-latency ratios' intervals.
type addedIntervals struct{ p50, p99 span }

// intervals bootstraps proxyd's (pd) added-latency ratios over the
// reverse proxy's (rp), each over the direct path d: the rounds are drawn
// with replacement, the same draw for the three paths so that a round's
// calls stay together (what made them paired), and the ratios taken on
// each draw as on the whole. A single run's p99 ratio is a ratio of two
// differences of tails a few hundred microseconds apart, so it moves
// between runs by more than the targets' margin; the interval says how
// far this run's rounds alone let it move. It does not cover what
// changes from run to run (what else the machine does meanwhile), so it
// is a floor on the uncertainty, not its measure. The seed is fixed: the
// same samples give the same interval.
func (p paired) intervals(d, rp, pd int) addedIntervals {
	return bootstrap(len(p[d]), func(idx []int, path int, buf []time.Duration) []time.Duration {
		for _, i := range idx {
			if s := p[path][i]; s.ok {
				buf = append(buf, s.took)
			}
		}
		return buf
	}, d, rp, pd)
}

// blocked are a block measurement's latencies by round and path: in each
// round every path had one block of calls (blocks).
type blocked [][]timings

// timings are each path's latencies over all rounds, sorted.
func (bl blocked) timings() []timings {
	if len(bl) == 0 {
		return nil
	}
	lat := make([]timings, len(bl[0]))
	for _, round := range bl {
		for i, t := range round {
			lat[i] = append(lat[i], t...)
		}
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	return lat
}

// intervals are the block ratios' intervals, bootstrapped as paired's
// with the rounds of blocks drawn (the same draw for the three paths,
// whose blocks of a round ran one after another). A block's p99 is set by
// the moments of machine noise its calls met, a few a block at 16
// clients, so one or two blocks can carry a run's block p99: with the
// few rounds a run has, the interval shows how far they move it.
func (bl blocked) intervals(d, rp, pd int) addedIntervals {
	return bootstrap(len(bl), func(idx []int, path int, buf []time.Duration) []time.Duration {
		for _, r := range idx {
			buf = append(buf, bl[r][path]...)
		}
		return buf
	}, d, rp, pd)
}

// bootstrap draws n units (rounds) with replacement bootstrapDraws times,
// pools each of the paths d, rp and pd over a draw (pool appends a path's
// latencies over the drawn units to buf), and returns the 90% intervals
// of the ratios taken on the draws. The seed is fixed: the same samples
// give the same interval.
func bootstrap(n int, pool func(idx []int, path int, buf []time.Duration) []time.Duration, d, rp, pd int) addedIntervals {
	if n == 0 {
		return addedIntervals{}
	}
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	idx := make([]int, n)
	var bufs [3][]time.Duration
	r50 := make([]float64, 0, bootstrapDraws)
	r99 := make([]float64, 0, bootstrapDraws)
	for range bootstrapDraws {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		var q [3]quantiles
		for k, path := range [3]int{d, rp, pd} {
			buf := pool(idx, path, bufs[k][:0])
			slices.Sort(buf)
			bufs[k] = buf
			q[k] = quantiles{p50: pct(buf, 50), p99: pct(buf, 99)}
		}
		r50 = append(r50, ratioOf(q[0].p50, q[1].p50, q[2].p50))
		r99 = append(r99, ratioOf(q[0].p99, q[1].p99, q[2].p99))
	}
	return addedIntervals{spanOf(r50), spanOf(r99)}
}

// ratioOf is proxyd's added latency over the reverse proxy's, each over
// the direct call d; +Inf when the reverse proxy added nothing (there is
// no ratio: addedRatio prints "n/a").
func ratioOf(d, rp, pd time.Duration) float64 {
	if rp-d <= 0 {
		return math.Inf(1)
	}
	return float64(pd-d) / float64(rp-d)
}

func spanOf(r []float64) span {
	slices.Sort(r)
	return span{r[len(r)*5/100], r[len(r)*95/100]}
}

// ratioText prints a ratio, "n/a" where there is none (+Inf).
func ratioText(r float64) string {
	if math.IsInf(r, 1) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", r)
}

func (s span) String() string { return ratioText(s.lo) + "–" + ratioText(s.hi) }

func (iv addedIntervals) String() string {
	return fmt.Sprintf("p50 %s, p99 %s", iv.p50, iv.p99)
}

// fields are the intervals for a script: p50 lo and hi, p99 lo and hi
// (+Inf for an unbounded end).
func (iv addedIntervals) fields() string {
	return fmt.Sprintf("%.3f %.3f %.3f %.3f", iv.p50.lo, iv.p50.hi, iv.p99.lo, iv.p99.hi)
}

func TestPairedIntervals(t *testing.T) {
	const rounds = 3000
	// build makes rounds of three paths: a direct call with latency drawn
	// around 300 µs, and the reverse proxy's and proxyd's from add.
	build := func(seed uint64, add func(rng *rand.Rand, direct time.Duration) (rp, pd time.Duration)) paired {
		rng := rand.New(rand.NewPCG(seed, 0))
		p := make(paired, 3)
		for range rounds {
			d := 200*time.Microsecond + time.Duration(rng.ExpFloat64()*float64(100*time.Microsecond))
			rp, pd := add(rng, d)
			p[0] = append(p[0], sample{took: d, ok: true})
			p[1] = append(p[1], sample{took: rp, ok: true})
			p[2] = append(p[2], sample{took: pd, ok: true})
		}
		return p
	}
	jitter := func(rng *rand.Rand) time.Duration {
		return time.Duration(rng.ExpFloat64() * float64(80*time.Microsecond))
	}
	for _, tc := range []struct {
		name string
		p    paired
		// check fails the case with a message, or returns "".
		check func(p paired, iv addedIntervals) string
	}{
		{
			// A path that is its round's direct call plus a constant keeps
			// its order in every draw: every draw's ratio is exact.
			name: "constant overheads give an exact ratio",
			p: build(1, func(_ *rand.Rand, d time.Duration) (time.Duration, time.Duration) {
				return d + 100*time.Microsecond, d + 200*time.Microsecond
			}),
			check: func(_ paired, iv addedIntervals) string {
				for _, s := range []span{iv.p50, iv.p99} {
					if math.Abs(s.lo-2) > 1e-9 || math.Abs(s.hi-2) > 1e-9 {
						return fmt.Sprintf("want 2.00x–2.00x, got %s", s)
					}
				}
				return ""
			},
		},
		{
			name: "a reverse proxy that adds nothing has no ratio",
			p: build(2, func(_ *rand.Rand, d time.Duration) (time.Duration, time.Duration) {
				return d, d + 50*time.Microsecond
			}),
			check: func(_ paired, iv addedIntervals) string {
				if !math.IsInf(iv.p99.lo, 1) || iv.p99.String() != "n/a–n/a" {
					return fmt.Sprintf("want an unbounded interval, got %s", iv.p99)
				}
				return ""
			},
		},
		{
			// Independent noise on each path: the interval has width and
			// holds the whole run's ratio.
			name: "noisy tails give an interval around the run's ratio",
			p: build(3, func(rng *rand.Rand, d time.Duration) (time.Duration, time.Duration) {
				return d + 100*time.Microsecond + jitter(rng), d + 100*time.Microsecond + 2*jitter(rng)
			}),
			check: func(p paired, iv addedIntervals) string {
				q := make([]quantiles, 3)
				for i, lat := range p.timings() {
					q[i] = quantiles{p50: pct(lat, 50), p99: pct(lat, 99)}
				}
				for _, c := range []struct {
					name  string
					whole float64
					s     span
				}{
					{"p50", ratioOf(q[0].p50, q[1].p50, q[2].p50), iv.p50},
					{"p99", ratioOf(q[0].p99, q[1].p99, q[2].p99), iv.p99},
				} {
					if !(c.s.lo < c.whole && c.whole < c.s.hi) {
						return fmt.Sprintf("%s: the run's ratio %.3fx is outside its interval %s", c.name, c.whole, c.s)
					}
				}
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := tc.p.intervals(0, 1, 2)
			t.Logf("%s", iv)
			if msg := tc.check(tc.p, iv); msg != "" {
				t.Fatal(msg)
			}
			if iv.p99.lo > iv.p99.hi || iv.p50.lo > iv.p50.hi {
				t.Fatalf("interval ends out of order: %s", iv)
			}
		})
	}
}

func TestBlockIntervals(t *testing.T) {
	const rounds, calls = 4, 2000
	// build makes rounds of blocks of three paths: direct calls drawn
	// around 300 µs, the reverse proxy's 100 µs more, proxyd's from add.
	build := func(add func(round, n int, d time.Duration) time.Duration) blocked {
		rng := rand.New(rand.NewPCG(4, 0))
		bl := make(blocked, rounds)
		for r := range bl {
			bl[r] = make([]timings, 3)
			for n := range calls {
				d := 200*time.Microsecond + time.Duration(rng.ExpFloat64()*float64(100*time.Microsecond))
				bl[r][0] = append(bl[r][0], d)
				bl[r][1] = append(bl[r][1], d+100*time.Microsecond)
				bl[r][2] = append(bl[r][2], add(r, n, d))
			}
		}
		return bl
	}
	whole := func(bl blocked) float64 {
		lat := bl.timings()
		return ratioOf(pct(lat[0], 99), pct(lat[1], 99), pct(lat[2], 99))
	}
	t.Run("constant overheads give an exact ratio", func(t *testing.T) {
		iv := build(func(_, _ int, d time.Duration) time.Duration { return d + 200*time.Microsecond }).intervals(0, 1, 2)
		for _, s := range []span{iv.p50, iv.p99} {
			if math.Abs(s.lo-2) > 1e-9 || math.Abs(s.hi-2) > 1e-9 {
				t.Fatalf("want 2.00x–2.00x, got %s", s)
			}
		}
	})
	t.Run("one block's burst spans the interval", func(t *testing.T) {
		// proxyd adds what the reverse proxy does, but 6% of its first
		// block's calls meet a 5 ms burst: over the run, 1.5% of its calls.
		bl := build(func(r, n int, d time.Duration) time.Duration {
			if r == 0 && n%50 < 3 {
				return d + 5*time.Millisecond
			}
			return d + 100*time.Microsecond
		})
		iv, w := bl.intervals(0, 1, 2), whole(bl)
		t.Logf("run's p99 ratio %.2fx, interval %s", w, iv.p99)
		if w < 1.25 {
			t.Fatalf("the run's p99 ratio %.2fx: want the burst to carry it over the line", w)
		}
		if iv.p99.lo > 1.01 || iv.p99.hi < 1.25 {
			t.Fatalf("interval %s: want it to hold about 1x (the draws without the first block) and the line", iv.p99)
		}
	})
}
