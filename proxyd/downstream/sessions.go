package downstream

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
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

// sessionIDs issues and tracks downstream session ids (legacy era). It is
// mcp-go's session id manager and also lets the fast path check a session
// without going through the library.
type sessionIDs struct {
	mu         sync.RWMutex
	live       map[string]struct{}
	order      []string // live ids, oldest first (may hold ended ones)
	terminated map[string]struct{}
}

func newSessionIDs() *sessionIDs {
	return &sessionIDs{live: map[string]struct{}{}, terminated: map[string]struct{}{}}
}

var errUnknownSession = errors.New("unknown session id")

func (s *sessionIDs) Generate() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := sessionPrefix + hex.EncodeToString(b)
	s.mu.Lock()
	s.live[id] = struct{}{}
	s.order = append(s.order, id)
	for len(s.live) > maxLive && len(s.order) > 0 {
		oldest := s.order[0]
		s.order = s.order[1:]
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
	return id
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
	defer s.mu.Unlock()
	if _, ok := s.live[id]; !ok {
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
	return false, nil
}

// isLive reports whether id is a current session.
func (s *sessionIDs) isLive(id string) bool {
	s.mu.RLock()
	_, ok := s.live[id]
	s.mu.RUnlock()
	return ok
}
