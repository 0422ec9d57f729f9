package livestats

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	w := New(time.Minute, 10*time.Second)
	t0 := time.Unix(1_000_000, 0) // a bucket boundary
	add := func(at time.Duration, server string, ms float64, class, domain string) {
		w.Add(Call{Time: t0.Add(at), Server: server, DurationMS: ms, Failed: class != "", ErrorClass: class, FaultDomain: domain})
	}
	for i := range 10 {
		add(time.Duration(i)*time.Second, "a", float64(i+1), "", "")
	}
	add(15*time.Second, "a", 100, "http", "upstream")
	add(16*time.Second, "a", 5, "proxy_policy", "proxy")
	add(20*time.Second, "b", 7, "", "")
	w.Add(Call{Time: t0.Add(21 * time.Second), Server: "b", DurationMS: 1, Reinit: true, TokenRefresh: true})

	now := t0.Add(25 * time.Second)
	snap := w.Snapshot(now, "")
	if len(snap) != 2 || snap[0].Server != "a" || snap[1].Server != "b" {
		t.Fatalf("servers %+v", snap)
	}
	a := snap[0]
	if a.Calls != 12 || a.Failed != 2 || a.FailedBy["http"] != 1 || a.FailedBy["proxy_policy"] != 1 {
		t.Fatalf("a: %+v", a)
	}
	if a.P50MS != 5 || a.P99MS != 100 {
		t.Fatalf("a percentiles p50 %v p99 %v", a.P50MS, a.P99MS)
	}
	// Six 10 s buckets, oldest first; now is in the last one.
	if len(a.CallSeries) != 6 || a.CallSeries[3] != 10 || a.CallSeries[4] != 2 || a.CallSeries[5] != 0 {
		t.Fatalf("call series %v", a.CallSeries)
	}
	if b := snap[1]; b.Reinits != 1 || b.Refreshes != 1 || b.Calls != 2 {
		t.Fatalf("b: %+v", b)
	}
	// A fault-domain filter counts only that domain's failures.
	if a := w.Snapshot(now, "proxy")[0]; a.Failed != 1 || a.FailedBy["proxy_policy"] != 1 || a.ByDomain["upstream"] != 1 {
		t.Fatalf("filtered: %+v", a)
	}
	// A minute later the calls have left the window.
	if snap := w.Snapshot(now.Add(time.Minute), ""); len(snap) != 0 {
		t.Fatalf("expired window: %+v", snap)
	}
	// A call older than its slot's bucket is dropped, not mixed in.
	w.Add(Call{Time: t0.Add(time.Minute + 21*time.Second), Server: "b", DurationMS: 1})
	w.Add(Call{Time: t0.Add(21 * time.Second), Server: "b", DurationMS: 1})
	if b := w.Snapshot(t0.Add(time.Minute+25*time.Second), "")[0]; b.Calls != 1 {
		t.Fatalf("stale call mixed in: %+v", b)
	}
}

// Memory stays bounded however many calls arrive in one bucket.
func TestReservoirBound(t *testing.T) {
	w := New(10*time.Second, 10*time.Second)
	t0 := time.Unix(2_000_000, 0)
	for i := range 100_000 {
		w.Add(Call{Time: t0, Server: "s", DurationMS: float64(i % 100)})
	}
	if n := len(w.servers["s"].buckets[0].latencies); n != samplesPerBucket {
		t.Fatalf("%d latencies kept", n)
	}
	st := w.Snapshot(t0, "")[0]
	if st.Calls != 100_000 || st.P50MS < 40 || st.P50MS > 60 {
		t.Fatalf("%+v", st)
	}
}
