package bench

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// wireClock times one client's calls at its socket: each exchange from
// the moment the client library hands the request to the transport until
// the last byte of its answer is read. The library's own encoding and
// decoding, which differ by era and are no work of the path under test,
// stay outside; a path's time on the wire is the hops' and servers' alone.
// An exchange is a POST, or a GET resuming an SSE answer (Last-Event-ID,
// part of the call it resumes); other GETs (the listening stream) and
// DELETEs (session end) belong to no call and are not timed.
//
// A client is used by one goroutine at a time, so the clock holds the
// exchanges since the last reset: the ones a single call made.
type wireClock struct {
	base      http.RoundTripper
	total     atomic.Int64 // nanoseconds of the finished exchanges since reset
	exchanges atomic.Int64 // exchanges finished since reset

	keep atomic.Bool          // record the next POST (see keepNext)
	last atomic.Pointer[kept] // the POST recorded
}

// keepNext has the clock record the next POST it carries, for a replayer.
func (w *wireClock) keepNext() {
	w.last.Store(nil)
	w.keep.Store(true)
}

// kept is the POST recorded since keepNext, or nil.
func (w *wireClock) kept() *kept { return w.last.Load() }

// clientTransport is the clients' one connection pool. It keeps an idle
// connection for every client of a run (the default keeps 2 per host), so
// at 16 clients a call does not dial a new connection to its path.
var clientTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return t
}()

// newWireClock wraps the clients' shared transport.
func newWireClock() *wireClock { return &wireClock{base: clientTransport} }

func (w *wireClock) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost && (req.Method != http.MethodGet || req.Header.Get("Last-Event-ID") == "") {
		return w.base.RoundTrip(req)
	}
	if req.Method == http.MethodPost && req.GetBody != nil && w.keep.CompareAndSwap(true, false) {
		if body, err := req.GetBody(); err == nil {
			data, err := io.ReadAll(body)
			if err == nil {
				w.last.Store(&kept{url: req.URL.String(), header: req.Header.Clone(), body: data})
			}
		}
	}
	t0 := time.Now()
	resp, err := w.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &wireBody{ReadCloser: resp.Body, clock: w, t0: t0, last: time.Now()}
	return resp, nil
}

func (w *wireClock) reset() {
	w.total.Store(0)
	w.exchanges.Store(0)
}

// took returns the exchanges' summed time since reset and how many there
// were.
func (w *wireClock) took() (time.Duration, int) {
	return time.Duration(w.total.Load()), int(w.exchanges.Load())
}

// wireBody stops the clock of its exchange at the last read that returned
// bytes: a JSON answer's decoder, or an SSE answer's reader after the
// response event, only reach EOF or close after the library decoded, and
// that time is the client's. The exchange is settled at EOF, a read error or
// close, whichever comes first (an SSE answer is read on the library's
// goroutine and closed on the caller's, hence the lock).
type wireBody struct {
	io.ReadCloser
	clock *wireClock

	mu       sync.Mutex
	t0, last time.Time
	settled  bool
}

func (b *wireBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	if n > 0 && !b.settled {
		b.last = time.Now()
	}
	if err != nil {
		b.settle()
	}
	b.mu.Unlock()
	return n, err
}

func (b *wireBody) Close() error {
	err := b.ReadCloser.Close()
	b.mu.Lock()
	b.settle()
	b.mu.Unlock()
	return err
}

// settle adds the exchange to its clock once; b.mu is held.
func (b *wireBody) settle() {
	if b.settled {
		return
	}
	b.settled = true
	b.clock.total.Add(int64(b.last.Sub(b.t0)))
	b.clock.exchanges.Add(1)
}
