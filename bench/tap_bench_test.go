package bench

import (
	"io"
	"net/http"
	"sync/atomic"
)

// tap sits under a client library's transport. It counts the exchanges
// a call makes (a POST, or a GET resuming an SSE answer with
// Last-Event-ID; other GETs, the listening stream, and DELETEs, a
// session's end, belong to no call), and records one POST on request, the
// call a replayer sends again.
//
// A client is used by one goroutine at a time, so the tap holds the
// exchanges since the last reset: the ones a single call made.
type tap struct {
	base      http.RoundTripper
	exchanges atomic.Int64 // exchanges since reset

	keep atomic.Bool          // record the next POST (see keepNext)
	last atomic.Pointer[kept] // the POST recorded
}

// keepNext has the tap record the next POST it carries, for a replayer.
func (t *tap) keepNext() {
	t.last.Store(nil)
	t.keep.Store(true)
}

// kept is the POST recorded since keepNext, or nil.
func (t *tap) kept() *kept { return t.last.Load() }

// clientTransport is the clients' one connection pool. It keeps an idle
// connection for every client of a run (the default keeps 2 per host), so
// at 16 clients a call does not dial a new connection to its path.
var clientTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return t
}()

// newTap wraps the clients' shared transport.
func newTap() *tap { return &tap{base: clientTransport} }

func (t *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost && (req.Method != http.MethodGet || req.Header.Get("Last-Event-ID") == "") {
		return t.base.RoundTrip(req)
	}
	t.exchanges.Add(1)
	if req.Method == http.MethodPost && req.GetBody != nil && t.keep.CompareAndSwap(true, false) {
		if body, err := req.GetBody(); err == nil {
			if data, err := io.ReadAll(body); err == nil {
				t.last.Store(&kept{url: req.URL.String(), header: req.Header.Clone(), body: data})
			}
		}
	}
	return t.base.RoundTrip(req)
}

func (t *tap) reset() { t.exchanges.Store(0) }

// took is how many exchanges there were since reset.
func (t *tap) took() int { return int(t.exchanges.Load()) }
