package activity

import "github.com/mcpx-dev/mcpx/proxyd/store"

// NewReader is a Store for queries only (List, Get, Export, Summary) over
// a database opened read-only: no writer runs and nothing is trimmed; Add
// drops records. Close is a no-op.
func NewReader(db *store.DB) *Store {
	s := &Store{
		db:      db,
		opts:    Options{}.withDefaults(),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		subs:    make(map[*subscriber]struct{}),
	}
	s.closed.Store(true)
	close(s.stopped)
	return s
}
