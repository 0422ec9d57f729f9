package downstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// sessionPrefix marks session ids proxyd issued.
const sessionPrefix = "mcpx-"

// maxTerminated bounds the memory of ended sessions (they are remembered
// only so a client reusing one is told it ended); maxLive bounds sessions
// that clients never end (most never send DELETE): the oldest is dropped
// and its client told to initialize again.
const (
	maxTerminated = 4096
	maxLive       = 16384
)

// session is what proxyd keeps of one legacy-era client session: what the
// client declared, its log level, and its relayed requests in flight (for
// notifications/cancelled).
type session struct {
	id string

	mu       sync.Mutex
	caps     relay.Caps
	level    string // logging/setLevel, "" when never set
	inflight map[string]context.CancelFunc
	subs     map[string]bool // resource URIs subscribed to
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
	return func() {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
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
	s.mu.Unlock()
	for _, c := range calls {
		c()
	}
}

// sessionIDs issues and tracks downstream sessions (legacy era). It is
// mcp-go's session id manager and also lets the relay find a session
// without going through the library.
type sessionIDs struct {
	mu         sync.RWMutex
	live       map[string]*session
	order      []string // live ids, oldest first (may hold ended ones)
	terminated map[string]struct{}
	// ended is told of every session that ends (DELETE or eviction).
	ended func(*session)
}

func newSessionIDs() *sessionIDs {
	return &sessionIDs{live: map[string]*session{}, terminated: map[string]struct{}{}}
}

var errUnknownSession = errors.New("unknown session id")

func (s *sessionIDs) Generate() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := sessionPrefix + hex.EncodeToString(b)
	var evicted []*session
	s.mu.Lock()
	s.live[id] = &session{id: id}
	s.order = append(s.order, id)
	for len(s.live) > maxLive && len(s.order) > 0 {
		oldest := s.order[0]
		s.order = s.order[1:]
		if old, ok := s.live[oldest]; ok {
			evicted = append(evicted, old)
		}
		delete(s.live, oldest)
	}
	if len(s.order) > 2*maxLive {
		// Compact ids that ended by DELETE.
		kept := s.order[:0]
		for _, o := range s.order {
			if _, ok := s.live[o]; ok {
				kept = append(kept, o)
			}
		}
		s.order = kept
	}
	s.mu.Unlock()
	for _, old := range evicted {
		s.finish(old)
	}
	return id
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.terminated[id]; ok {
		return true, nil
	}
	if _, ok := s.live[id]; !ok {
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
	delete(s.live, id)
	if len(s.terminated) >= maxTerminated {
		for k := range s.terminated {
			delete(s.terminated, k)
			break
		}
	}
	s.terminated[id] = struct{}{}
	s.mu.Unlock()
	s.finish(sess)
	return false, nil
}

// get returns the live session id, or nil.
func (s *sessionIDs) get(id string) *session {
	s.mu.RLock()
	sess := s.live[id]
	s.mu.RUnlock()
	return sess
}

// each calls f for every live session.
func (s *sessionIDs) each(f func(*session)) {
	s.mu.RLock()
	all := make([]*session, 0, len(s.live))
	for _, sess := range s.live {
		all = append(all, sess)
	}
	s.mu.RUnlock()
	for _, sess := range all {
		f(sess)
	}
}
