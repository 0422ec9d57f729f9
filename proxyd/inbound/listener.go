// Package inbound bounds what proxyd's servers accept: open connections
// per listener (below the descriptor limit), request headers, bodies and
// keep-alive time, and the size of a request body.
package inbound

import (
	"net"
	"net/http"
	"sync"
	"syscall"
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

// conn gives its slot back once, on Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
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
