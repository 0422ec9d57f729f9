package downstream

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// sessionPrefix marks session ids proxyd issued.
const sessionPrefix = "mcpx-"

// maxTerminated bounds the memory of ended sessions (they are remembered
// only so a client reusing one is told it ended).
const maxTerminated = 4096

// Defaults of the session bounds (config limits.max_sessions and
// limits.session_idle_timeout). Most clients never send DELETE, so a
// session ends when it has been idle for the timeout or, at the cap, when
// it is the least recently used; its client is told to initialize again.
const (
	DefaultMaxSessions        = 1024
	DefaultSessionIdleTimeout = time.Hour
)

// session is what proxyd keeps of one legacy-era client session: what the
// client declared, its log level, and its relayed requests in flight (for
// notifications/cancelled).
type session struct {
	id string

	// Under sessionIDs.mu: the session's place in the LRU queue and its
	// last request. busy counts its open GET streams and relayed requests
	// in flight: a session listening for notifications or waiting for an
	// answer is in use even when it sends nothing.
	elem *list.Element
	used time.Time
	busy atomic.Int32

	mu       sync.Mutex
	caps     relay.Caps
	level    string // logging/setLevel, "" when never set
	inflight map[string]context.CancelFunc
	// subs are the resource URIs subscribed to, each with the server that
	// holds its upstream subscription: ending one must reach that server
	// even when it no longer lists the URI (not ready, or its list changed).
	subs map[string]string
	// subscribing counts the subscribes under way to URIs not in subs:
	// each keeps a place among the session's bound until it is recorded
	// or fails, so subscribes at once cannot pass the bound together.
	subscribing int
	// roots are the upstreams that asked the client for its roots.
	roots map[string]bool
	// stream ends the session's open GET stream (nil: none). A session
	// has one: a client opening another (reconnecting, most often, while
	// proxyd has not yet seen the old connection go) ends the older, and
	// the session's end ends it, so neither holds a connection forever.
	stream *getStream
	ended  bool
}

// getStream is one open GET stream of a session; end ends it.
type getStream struct{ end context.CancelFunc }

// askedRoots notes that server asked the client for its roots.
func (s *session) askedRoots(server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roots == nil {
		s.roots = map[string]bool{}
	}
	s.roots[server] = true
}

// rootsAskers are the upstreams that asked the client for its roots.
func (s *session) rootsAskers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.roots))
	for srv := range s.roots {
		out = append(out, srv)
	}
	return out
}

func (s *session) setCaps(c relay.Caps) {
	s.mu.Lock()
	s.caps = c
	s.mu.Unlock()
}

func (s *session) capabilities() relay.Caps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.caps
}

func (s *session) setLevel(l string) {
	s.mu.Lock()
	s.level = l
	s.mu.Unlock()
}

func (s *session) logLevel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.level
}

// track registers a relayed request under the client's id; the returned
// func ends the tracking.
func (s *session) track(id string, cancel context.CancelFunc) func() {
	if id == "" {
		return func() {}
	}
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[string]context.CancelFunc{}
	}
	s.inflight[id] = cancel
	s.mu.Unlock()
	s.busy.Add(1)
	return func() {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
		s.busy.Add(-1)
	}
}

// cancel ends the relayed request id; false when none is in flight.
func (s *session) cancel(id string) bool {
	s.mu.Lock()
	c := s.inflight[id]
	s.mu.Unlock()
	if c != nil {
		c()
	}
	return c != nil
}

// end cancels everything the session has in flight.
func (s *session) end() {
	s.mu.Lock()
	calls := s.inflight
	s.inflight = nil
	stream := s.stream
	s.stream, s.ended = nil, true
	s.mu.Unlock()
	for _, c := range calls {
		c()
	}
	if stream != nil {
		stream.end()
	}
}

// openStream makes g the session's GET stream, ending the one open
// before it; false when the session has ended.
func (s *session) openStream(g *getStream) bool {
	s.mu.Lock()
	old, ended := s.stream, s.ended
	if !ended {
		s.stream = g
	}
	s.mu.Unlock()
	if old != nil {
		old.end()
	}
	return !ended
}

// closeStream forgets g if it is still the session's GET stream.
func (s *session) closeStream(g *getStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == g {
		s.stream = nil
	}
}

// sessionIDs issues and tracks downstream sessions (legacy era). It is
// mcp-go's session id manager and also lets the relay find a session
// without going through the library. A session that ends without DELETE
// (idle, or evicted at the cap) is released in the library too.
type sessionIDs struct {
	mu         sync.Mutex
	live       map[string]*session
	lru        *list.List // of *session; front: most recently used
	terminated map[string]struct{}
	max        int
	idle       time.Duration
	now        func() time.Time
	// ended is told of every session that ends (DELETE or eviction).
	ended func(*session)
	// release ends a session proxyd ended in the library (its own
	// per-session state), as a DELETE would.
	release []func(id string)
	// registered counts sessions the library holds state for.
	registered atomic.Int64
}

func newSessionIDs() *sessionIDs {
	return &sessionIDs{live: map[string]*session{}, lru: list.New(), terminated: map[string]struct{}{},
		max: DefaultMaxSessions, idle: DefaultSessionIdleTimeout, now: time.Now}
}

var errUnknownSession = errors.New("unknown session id")

func (s *sessionIDs) Generate() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := sessionPrefix + hex.EncodeToString(b)
	s.mu.Lock()
	now := s.now()
	sess := &session{id: id, used: now}
	sess.elem = s.lru.PushFront(sess)
	s.live[id] = sess
	ended := s.evict(now)
	s.mu.Unlock()
	s.endAll(ended)
	return id
}

// evict ends sessions idle past the timeout and, over the cap, the least
// recently used, from the back of the queue (every use moves a session to
// the front). A session with an open GET stream or a request in flight is
// in use however quiet: it goes to the front instead, unless every
// session has had its turn (every one of them busy).
// It returns the ended sessions; the caller ends them unlocked.
func (s *sessionIDs) evict(now time.Time) []*session {
	var ended []*session
	idleBefore := now.Add(-s.idle)
	for looked := 0; s.lru.Len() > 0; looked++ {
		over := len(s.live) > s.max
		sess := s.lru.Back().Value.(*session)
		switch {
		case sess.busy.Load() > 0 && !(over && looked >= s.lru.Len()):
			if looked >= s.lru.Len() {
				return ended
			}
			sess.used = now
			s.lru.MoveToFront(sess.elem)
		case over || sess.used.Before(idleBefore):
			s.forget(sess)
			ended = append(ended, sess)
		default:
			return ended
		}
	}
	return ended
}

// forget removes a live session, remembering it as terminated; under mu.
func (s *sessionIDs) forget(sess *session) {
	s.lru.Remove(sess.elem)
	delete(s.live, sess.id)
	if len(s.terminated) >= maxTerminated {
		for k := range s.terminated {
			delete(s.terminated, k)
			break
		}
	}
	s.terminated[sess.id] = struct{}{}
}

// endAll ends sessions proxyd evicted: in proxyd, then in the library.
func (s *sessionIDs) endAll(ended []*session) {
	for _, sess := range ended {
		s.finish(sess)
		for _, r := range s.release {
			r(sess.id)
		}
	}
}

func (s *sessionIDs) finish(sess *session) {
	sess.end()
	if s.ended != nil {
		s.ended(sess)
	}
}

func (s *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if !strings.HasPrefix(id, sessionPrefix) {
		return false, errUnknownSession
	}
	s.mu.Lock()
	live := s.touch(id) != nil
	_, term := s.terminated[id]
	ended := s.evict(s.now())
	s.mu.Unlock()
	s.endAll(ended)
	if term {
		return true, nil
	}
	if !live {
		return false, errUnknownSession
	}
	return false, nil
}

func (s *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	sess, ok := s.live[id]
	if !ok {
		s.mu.Unlock()
		return false, nil
	}
	s.forget(sess)
	s.mu.Unlock()
	s.finish(sess)
	return false, nil
}

// touch marks a live session used and returns it (nil if not live); under mu.
func (s *sessionIDs) touch(id string) *session {
	sess := s.live[id]
	if sess != nil {
		sess.used = s.now()
		s.lru.MoveToFront(sess.elem)
	}
	return sess
}

// get returns the live session id, marked used, or nil.
func (s *sessionIDs) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touch(id)
}

// each calls f for every live session.
func (s *sessionIDs) each(f func(*session)) {
	s.mu.Lock()
	all := make([]*session, 0, len(s.live))
	for _, sess := range s.live {
		all = append(all, sess)
	}
	s.mu.Unlock()
	for _, sess := range all {
		f(sess)
	}
}

// listen marks a session as listening while its GET stream is open, the
// stream that end ends (see session.stream); the returned func ends that.
// ok is false when there is no such session.
func (s *sessionIDs) listen(id string, end context.CancelFunc) (done func(), ok bool) {
	sess := s.get(id)
	if sess == nil {
		return nil, false
	}
	g := &getStream{end: end}
	if !sess.openStream(g) {
		return nil, false
	}
	sess.busy.Add(1)
	return func() {
		sess.closeStream(g)
		s.mu.Lock()
		s.touch(id)
		sess.busy.Add(-1)
		s.mu.Unlock()
	}, true
}

// counted adds hooks to h that count the sessions the library registers.
func (s *sessionIDs) counted(h *server.Hooks) *server.Hooks {
	h.AddOnRegisterSession(func(context.Context, server.ClientSession) { s.registered.Add(1) })
	h.AddOnUnregisterSession(func(context.Context, server.ClientSession) { s.registered.Add(-1) })
	return h
}

// count is the number of live sessions.
func (s *sessionIDs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// SetSessionLimits sets the session cap and idle timeout (0: default).
func (s *Server) SetSessionLimits(max int, idle time.Duration) {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	if max > 0 {
		s.sessions.max = max
	}
	if idle > 0 {
		s.sessions.idle = idle
	}
}

// Sessions is the number of live downstream sessions: proxyd's, and the
// library's (which holds per-session state of its own).
func (s *Server) Sessions() (live, library int) {
	return s.sessions.count(), int(s.sessions.registered.Load())
}

// releaseIn has the library handler h drop a session proxyd ended, as a
// DELETE would; its per-session state goes with proxyd's.
func (s *sessionIDs) releaseIn(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release = append(s.release, func(id string) {
		r, _ := http.NewRequest(http.MethodDelete, "http://127.0.0.1/mcp", nil)
		r.Header.Set("Mcp-Session-Id", id)
		h.ServeHTTP(discard{h: http.Header{}}, r)
	})
}

// discard is a ResponseWriter for the library's answer to an internal
// DELETE, which nobody reads.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
