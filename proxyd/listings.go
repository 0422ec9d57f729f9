package proxyd

import (
	"context"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// listedWait bounds how long a status waits for the endpoint to publish a
// server that has just become ready.
const listedWait = 2 * time.Second

// notListedSummary explains a server connected upstream whose lists the
// endpoint has not published yet.
const notListedSummary = "connected; the MCP endpoint has not listed it yet"

// listings records what the MCP endpoint has published of each upstream:
// the state generation each connection had when the last sync began. A
// server is usable through the endpoint once the generation of the state
// status reports has been published.
type listings struct {
	mu        sync.Mutex
	published map[*upstream.Conn]uint64
	changed   chan struct{} // closed and replaced at each publish
}

func newListings() *listings {
	return &listings{published: map[*upstream.Conn]uint64{}, changed: make(chan struct{})}
}

// generations reads each connection's generation; taken before a sync
// reads the states, it is never ahead of what the sync publishes.
func generations(conns []*upstream.Conn) map[*upstream.Conn]uint64 {
	gens := make(map[*upstream.Conn]uint64, len(conns))
	for _, c := range conns {
		gens[c] = c.Generation()
	}
	return gens
}

// publish records a finished sync and wakes the statuses waiting for it.
func (l *listings) publish(gens map[*upstream.Conn]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published = gens
	close(l.changed)
	l.changed = make(chan struct{})
}

// listed reports whether the endpoint has published c at generation gen
// or later, and otherwise a channel closed at the next publish.
func (l *listings) listed(c *upstream.Conn, gen uint64) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.published[c]; ok && g >= gen {
		return true, nil
	}
	return false, l.changed
}

// awaitListed waits, up to listedWait, until the endpoint has published
// every server that is ready, so a status read next calls a server ready
// only if an MCP client of the endpoint sees its tools.
func (d *Daemon) awaitListed(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, listedWait)
	defer cancel()
	for _, c := range d.mgr.List() {
		if c.State() != api.StateReady {
			continue
		}
		gen := c.Generation() // read after the state: covers it
		for {
			ok, next := d.listings.listed(c, gen)
			if cur, managed := d.mgr.Get(c.Name()); ok || !managed || cur != c {
				break // published, or removed by a reload and never to be
			}
			if d.opts.awaitingList != nil {
				d.opts.awaitingList()
			}
			tick(d.syncTick) // the change's own request may not be in yet
			select {
			case <-next:
			case <-ctx.Done():
				return
			case <-d.shutdown:
				return
			}
		}
	}
}

// readyIfListed reports a ready server as still connecting while the
// endpoint has not published it at the state st was read at.
func (d *Daemon) readyIfListed(c *upstream.Conn, st *api.ServerStatus) {
	if st.State != api.StateReady {
		return
	}
	if ok, _ := d.listings.listed(c, c.Generation()); !ok {
		st.State = api.StateConnecting
		st.Summary = notListedSummary
	}
}
