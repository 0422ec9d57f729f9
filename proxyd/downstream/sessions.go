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

// sessionIDs issues and tracks downstream session ids (legacy era). It is
// mcp-go's session id manager and also lets the fast path check a session
// without going through the library. A session that ends without DELETE
// (idle, or evicted at the cap) is released in the library too, through
// release.
type sessionIDs struct {
	mu         sync.Mutex
	live       map[string]*list.Element // of *session
	lru        *list.List               // front: most recently queued
	terminated map[string]struct{}
	max        int
	idle       time.Duration
	now        func() time.Time
	// release ends sessions in the library (its per-session state).
	release []func(id string)
	// registered counts sessions the library holds state for.
	registered atomic.Int64
}

type session struct {
	id   string
	used time.Time // last request, under mu
	// streams counts open GET streams: a session listening for
	// notifications is in use even when it sends nothing.
	streams atomic.Int32
}

func newSessionIDs() *sessionIDs {
	return &sessionIDs{live: map[string]*list.Element{}, lru: list.New(), terminated: map[string]struct{}{},
		max: DefaultMaxSessions, idle: DefaultSessionIdleTimeout, now: time.Now}
}

var errUnknownSession = errors.New("unknown session id")

func (s *sessionIDs) Generate() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := sessionPrefix + hex.EncodeToString(b)
	s.mu.Lock()
	now := s.now()
	s.live[id] = s.lru.PushFront(&session{id: id, used: now})
	ended := s.evict(now)
	s.mu.Unlock()
	s.releaseAll(ended)
	return id
}

// evict ends sessions idle past the timeout and, over the cap, the least
// recently used, from the back of the queue (every use moves a session to
// the front). A session with an open GET stream is in use however quiet:
// it goes to the front instead, unless every session has had its turn.
// It returns the ended ids; the caller releases them unlocked.
func (s *sessionIDs) evict(now time.Time) []string {
	var ended []string
	idleBefore := now.Add(-s.idle)
	for looked := 0; s.lru.Len() > 0; looked++ {
		over := len(s.live) > s.max
		e := s.lru.Back()
		ss := e.Value.(*session)
		switch {
		case ss.streams.Load() > 0 && !(over && looked >= s.lru.Len()):
			if looked >= s.lru.Len() {
				return ended
			}
			ss.used = now
			s.lru.MoveToFront(e)
		case over || ss.used.Before(idleBefore):
			ended = append(ended, s.end(e))
		default:
			return ended
		}
	}
	return ended
}

// end forgets a live session as terminated, under mu.
func (s *sessionIDs) end(e *list.Element) string {
	ss := s.lru.Remove(e).(*session)
	delete(s.live, ss.id)
	s.remember(ss.id)
	return ss.id
}

func (s *sessionIDs) remember(id string) {
	if len(s.terminated) >= maxTerminated {
		for k := range s.terminated {
			delete(s.terminated, k)
			break
		}
	}
	s.terminated[id] = struct{}{}
}

func (s *sessionIDs) releaseAll(ids []string) {
	for _, id := range ids {
		for _, r := range s.release {
			r(id)
		}
	}
}

func (s *sessionIDs) Validate(id string) (isTerminated bool, err error) {
	if !strings.HasPrefix(id, sessionPrefix) {
		return false, errUnknownSession
	}
	s.mu.Lock()
	live := s.touch(id)
	_, term := s.terminated[id]
	ended := s.evict(s.now())
	s.mu.Unlock()
	s.releaseAll(ended)
	if term {
		return true, nil
	}
	if !live {
		return false, errUnknownSession
	}
	return false, nil
}

// touch marks a live session used, under mu; it reports whether id is live.
func (s *sessionIDs) touch(id string) bool {
	e, ok := s.live[id]
	if ok {
		e.Value.(*session).used = s.now()
		s.lru.MoveToFront(e)
	}
	return ok
}

func (s *sessionIDs) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.live[id]; ok {
		s.end(e)
	}
	return false, nil
}

// isLive reports whether id is a current session, and marks it used.
func (s *sessionIDs) isLive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touch(id)
}

// listen marks a session as listening while its GET stream is open; the
// returned func ends that.
func (s *sessionIDs) listen(id string) func() {
	s.mu.Lock()
	e, ok := s.live[id]
	s.mu.Unlock()
	if !ok {
		return func() {}
	}
	ss := e.Value.(*session)
	ss.streams.Add(1)
	return func() {
		s.mu.Lock()
		s.touch(id)
		ss.streams.Add(-1)
		s.mu.Unlock()
	}
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
