package downstream

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/internal/procs"
)

type clientKey struct{}

// Handler is the Streamable HTTP endpoint at /mcp. With a non-empty token
// every request must carry "Authorization: Bearer <token>"; requests with
// a foreign Host or Origin are refused (DNS rebinding).
func (s *Server) Handler(token string, client string) http.Handler {
	opts := []server.StreamableHTTPOption{
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManager(s.sessions),
	}
	if client != "" {
		opts = append(opts, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, clientKey{}, client)
		}))
	}
	h := server.NewStreamableHTTPServer(s.mcp, opts...)
	s.sessions.releaseIn(h)
	return s.guard(h, token, client)
}

func (s *Server) guard(next http.Handler, token, client string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "forbidden: Host must be a loopback address (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
			http.Error(w, "forbidden: cross-origin request refused", http.StatusForbidden)
			return
		}
		if r.URL.Path != endpointPath {
			http.Error(w, "not found: the MCP endpoint is "+endpointPath, http.StatusNotFound)
			return
		}
		if token != "" {
			if !bearerOK(r.Header.Get("Authorization"), token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpx", error="invalid_token", error_description="use the token from 'mcpx connect-info'"`)
				http.Error(w, "unauthorized: proxyd needs its bearer token; run 'mcpx connect-info'", http.StatusUnauthorized)
				return
			}
		}
		if refuseBatch(w, r) {
			return
		}
		if r.Method == http.MethodPost {
			// A request in flight, from its arrival to the end of its
			// answer: the activity writer, while calls come one at a
			// time, writes its batches in moments without one.
			procs.Serve()
			defer procs.Served()
		}
		handled, lib := s.relay(w, r, client)
		if handled {
			return
		}
		if lib != nil {
			defer lib.finish()
			w = lib
		}
		legacy := !mcp.IsModernProtocol(r.Header.Get("Mcp-Protocol-Version"))
		if r.Method == http.MethodDelete && legacy {
			// The library ends any id it is given with 200, one that
			// never was a session included.
			if _, ok := s.knownSession(w, r, "DELETE ends a session"); !ok {
				return
			}
		}
		if r.Method == http.MethodGet && legacy {
			// (The modern era has no GET stream: the library answers 405.)
			// The library would open a stream on any id, or on none.
			sid, ok := s.knownSession(w, r, "a GET stream belongs to a session")
			if !ok {
				return
			}
			release, ok := s.holdStream(&s.gets)
			if !ok {
				refuseStream(w, s.maxStreams.Load())
				return
			}
			defer release()
			ctx, end := context.WithCancel(r.Context())
			defer end()
			done, ok := s.sessions.listen(sid, end)
			if !ok {
				noSession(w)
				return
			}
			defer done()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// knownSession is the legacy session r names; when r names none, or one
// that ended (or that a proxyd before a restart gave), it answers as the
// spec asks, 400 or 404 (a client starts a new session on 404), and ok is
// false. what says what the request needs the session for.
func (s *Server) knownSession(w http.ResponseWriter, r *http.Request, what string) (sid string, ok bool) {
	sid = r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "bad request: "+what+"; send the Mcp-Session-Id header that initialize returned", http.StatusBadRequest)
		return "", false
	}
	if term, err := s.sessions.Validate(sid); term || err != nil {
		noSession(w)
		return "", false
	}
	return sid, true
}

// noSession answers a request naming a session that does not exist (it
// ended, or a proxyd before a restart gave it): 404, on which a client
// starts a new one.
func noSession(w http.ResponseWriter) {
	http.Error(w, "not found: no such session (it ended, or proxyd restarted); initialize a new one", http.StatusNotFound)
}

// holdStream counts one more GET (or listen) stream in counter, when
// the bound leaves room; release ends the count.
func (s *Server) holdStream(counter *atomic.Int64) (release func(), ok bool) {
	counter.Add(1)
	// Counted first, then checked: streams opening at once never pass
	// the bound together.
	if max := s.maxStreams.Load(); max > 0 && s.gets.Load()+s.listening.Load() > max {
		counter.Add(-1)
		return nil, false
	}
	return func() { counter.Add(-1) }, true
}

// refuseStream answers a stream over the bound: 503, to come back later.
func refuseStream(w http.ResponseWriter, max int64) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, fmt.Sprintf("service unavailable: %d GET and listen streams are open, the most proxyd serves at once (half of limits.max_connections); retry later, or end sessions no longer used", max), http.StatusServiceUnavailable)
}

func loopbackHost(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || host == "proxyd.sock" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	return loopbackHost(u.Host)
}
