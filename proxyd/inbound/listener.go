// Package inbound bounds what proxyd's servers accept: open connections
// per listener (below the descriptor limit), request headers, bodies and
// keep-alive time, the size of a request body, and how long a write may
// wait for a client that does not read.
package inbound

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Listener caps the connections open at once on one listener. At the cap
// it makes room by closing the connection that has waited longest without
// a request in progress (idle keep-alive, or connected and silent); when
// every connection is busy, the new one waits until one ends or falls
// quiet. Descriptors stay bounded (one over the cap at most), and a flood
// of idle connections cannot lock clients out.
type Listener struct {
	net.Listener
	slots chan struct{}
	// quieted wakes an Accept waiting for room when a connection falls quiet.
	quieted chan struct{}

	mu    sync.Mutex
	quiet map[net.Conn]uint64 // connections without a request in progress, by when they fell quiet
	seq   uint64

	stall   time.Duration // 0: writes wait as long as the peer lets them
	onStall func(remote net.Addr, after time.Duration)
}

// Limit wraps ln with a cap of max open connections. Serve it with an
// http.Server whose ConnState is (or calls) l.ConnState.
func Limit(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, slots: make(chan struct{}, max), quieted: make(chan struct{}, 1), quiet: map[net.Conn]uint64{}}
}

// Cap is the number of connections the listener keeps open at most.
func (l *Listener) Cap() int { return cap(l.slots) }

// Open is the number of connections open now.
func (l *Listener) Open() int { return len(l.slots) }

// Accept accepts a connection and gives it a slot, closing the quietest
// other connection when none is free.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			lc := &conn{Conn: c, l: l}
			l.setQuiet(lc, true)
			return lc, nil
		default:
		}
		if l.evictOldestQuiet() {
			continue
		}
		select {
		case l.slots <- struct{}{}:
			lc := &conn{Conn: c, l: l}
			l.setQuiet(lc, true)
			return lc, nil
		case <-l.quieted:
		}
	}
}

// BoundWrites cuts off a peer that takes no part of a write for about
// stall (between half of it and all of it): its connection is closed, so
// the write fails, the request's context ends and its descriptor is
// freed. A slow peer that keeps reading is never cut, however long a
// large answer takes. onStall, if set, hears of each connection cut. Call
// it before the listener is served.
func (l *Listener) BoundWrites(stall time.Duration, onStall func(remote net.Addr, after time.Duration)) {
	l.stall, l.onStall = stall, onStall
}

// ConnState tracks which connections are between requests; install it as
// the http.Server's ConnState.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateIdle:
		l.setQuiet(c, true)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		l.setQuiet(c, false)
	}
}

func (l *Listener) setQuiet(c net.Conn, quiet bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !quiet {
		delete(l.quiet, c)
		return
	}
	l.seq++
	l.quiet[c] = l.seq
	select {
	case l.quieted <- struct{}{}:
	default:
	}
}

// evictOldestQuiet closes the connection quiet the longest, and reports
// whether there was one.
func (l *Listener) evictOldestQuiet() bool {
	l.mu.Lock()
	var oldest net.Conn
	var at uint64
	for c, seq := range l.quiet {
		if oldest == nil || seq < at {
			oldest, at = c, seq
		}
	}
	delete(l.quiet, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// conn gives its slot back once, on Close, and bounds its writes while
// its listener does.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once

	// deadline is the write deadline the stall bound last set (Unix ns),
	// 0 when none is; explicit is set while a caller's own write deadline
	// is in place, which the bound leaves alone.
	deadline atomic.Int64
	explicit atomic.Bool
	cut      atomic.Bool
}

// stallChunk is the most of one write handed to the socket at a time
// while writes are bounded, so that the bound is on the peer's progress
// and not on how long a large answer takes to reach a slow reader.
const stallChunk = 64 << 10

func (c *conn) Write(p []byte) (int, error) {
	stall := c.l.stall
	if stall <= 0 || c.explicit.Load() {
		return c.Conn.Write(p)
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), stallChunk)
		c.armStall(stall)
		m, err := c.Conn.Write(p[:k])
		n += m
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !c.explicit.Load() {
				c.stalled(stall)
			}
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// armStall gives the next write at least half the bound: the deadline is
// moved only when less than that is left, so a connection that writes
// often sets it about twice per bound, not once per write.
func (c *conn) armStall(stall time.Duration) {
	now := time.Now()
	if d := c.deadline.Load(); d != 0 && d-now.UnixNano() > int64(stall/2) {
		return
	}
	at := now.Add(stall)
	c.deadline.Store(at.UnixNano())
	_ = c.Conn.SetWriteDeadline(at)
}

// stalled closes a connection whose peer took none of a write in time.
func (c *conn) stalled(stall time.Duration) {
	if !c.cut.CompareAndSwap(false, true) {
		return
	}
	if c.l.onStall != nil {
		c.l.onStall(c.RemoteAddr(), stall)
	}
	_ = c.Close()
}

// SetWriteDeadline sets a caller's own deadline, which writes then keep
// to instead of the stall bound. net/http clears the deadline after each
// request; with none of its own in place that leaves the bound's as it
// is (it is moved before it could cut a write short).
func (c *conn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() && !c.explicit.Load() && c.deadline.Load() != 0 {
		return nil
	}
	c.explicit.Store(!t.IsZero())
	c.deadline.Store(0)
	return c.Conn.SetWriteDeadline(t)
}

func (c *conn) SetDeadline(t time.Time) error {
	c.explicit.Store(!t.IsZero())
	c.deadline.Store(0)
	return c.Conn.SetDeadline(t)
}

// NetConn is the connection the listener accepted (for peer credentials).
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.setQuiet(c, false)
		<-c.l.slots
	})
	return err
}

// DescriptorLimit is the process's open-file limit (soft), or 0 when it
// cannot be read.
func DescriptorLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}

// Budget splits a descriptor limit between the control socket and the MCP
// endpoint: a fixed reserve for the database, listeners and files, up to
// 128 control connections, and for the endpoint at most half of the rest,
// since every client connection may need one to an upstream. want is the
// configured endpoint cap; nofile 0 means unknown (want is used as is).
func Budget(nofile, want int) (socket, endpoint int) {
	const reserve = 64
	socket = 128
	if nofile <= 0 {
		return socket, want
	}
	socket = min(socket, max(nofile/4, 4))
	endpoint = min(want, max((nofile-reserve-socket)/2, 4))
	return socket, endpoint
}
