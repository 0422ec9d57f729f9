package proxyd

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/replica"
)

// signInPoll is how often a replica looks for sign-ins and sign-outs made
// by others sharing its state.
const signInPoll = 2 * time.Second

// replicaLoop publishes this replica's server states on the heartbeat and
// follows the grants other replicas store, until ctx ends.
func (d *Daemon) replicaLoop(ctx context.Context) {
	beat := time.NewTicker(replica.Heartbeat)
	defer beat.Stop()
	poll := time.NewTicker(signInPoll)
	defer poll.Stop()
	var suspect map[string]int64
	publish := func() {
		bctx, cancel := context.WithTimeout(ctx, replica.Heartbeat)
		defer cancel()
		if err := d.replicas.Beat(bctx, d.status(bctx).Servers); err != nil && ctx.Err() == nil {
			d.log.Warn("replica heartbeat", "err", redact.Text(err.Error()))
		}
	}
	publish()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			publish()
		case <-d.beatTick:
			// State changes are published at once, at most one a second.
			publish()
			beat.Reset(replica.Heartbeat)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		case <-poll.C:
			suspect = d.followSignIns(ctx, suspect)
		}
	}
}

func (d *Daemon) grantGenerations(ctx context.Context) map[string]int64 {
	pctx, cancel := context.WithTimeout(ctx, signInPoll)
	defer cancel()
	gens, err := d.auth.store.Generations(pctx)
	if err != nil {
		d.log.Debug("reading grant generations", "err", redact.Text(err.Error()))
		return nil
	}
	return gens
}

// followSignIns applies grants that another process changed in the store:
// a sign-in on another replica (or another process on the same SQLite
// file) is used here too, and a sign-out is honoured. suspect holds the
// differences the previous poll saw; it returns this poll's.
func (d *Daemon) followSignIns(ctx context.Context, suspect map[string]int64) map[string]int64 {
	gens := d.grantGenerations(ctx)
	if gens == nil {
		return suspect
	}
	next := map[string]int64{}
	d.auth.mu.RLock()
	names := make(map[string]string, len(d.auth.keys))
	for name, key := range d.auth.keys {
		names[name] = key
	}
	d.auth.mu.RUnlock()
	for name, key := range names {
		g, has := gens[key]
		cg, cached := d.auth.coord.CachedGeneration(key)
		signedIn := d.auth.isSignedIn(key)
		if has == signedIn && (!has || !cached || cg == g) {
			continue // this process's view is the store's
		}
		// This process's own sign-in or sign-out shows in the store a
		// moment before it is applied here: act on a difference only
		// when the next poll still sees it.
		sig := g
		if !has {
			sig = -1
		}
		if prev, ok := suspect[key]; !ok || prev != sig {
			next[key] = sig
			continue
		}
		d.auth.coord.Forget(key)
		d.auth.setSignedIn(key, has)
		if c, ok := d.mgr.Get(name); ok && (!has || c.State() != api.StateReady) {
			d.log.Info("grant changed by another process sharing the state", "server", name, "signed_in", has)
			c.Reconnect()
		}
	}
	return next
}

// replicaServers is every live replica's view of the servers: this one
// live, the others as last published.
func (d *Daemon) replicaServers(ctx context.Context) []api.ServerStatus {
	out := []api.ServerStatus{}
	d.awaitListed(ctx)
	for _, c := range d.mgr.List() {
		st := d.serverStatus(c)
		st.Replica = d.replicas.ID()
		out = append(out, st)
	}
	list, err := d.replicas.List(ctx)
	if err != nil {
		d.log.Warn("listing replicas", "err", redact.Text(err.Error()))
		return out
	}
	for _, r := range list {
		if r.Self || !r.Live || len(r.Servers) == 0 {
			continue
		}
		var theirs []api.ServerStatus
		if json.Unmarshal(r.Servers, &theirs) != nil {
			continue
		}
		for _, st := range theirs {
			st.Replica = r.ID
			out = append(out, st)
		}
	}
	return out
}
