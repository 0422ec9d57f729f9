package proxyd

import (
	"context"
	"encoding/json"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"time"

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
	known := d.grantGenerations(ctx)
	publish := func() {
		bctx, cancel := context.WithTimeout(ctx, replica.Heartbeat)
		defer cancel()
		if err := d.replicas.Beat(bctx, d.status().Servers); err != nil && ctx.Err() == nil {
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
			known = d.followSignIns(ctx, known)
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

// followSignIns applies grants that changed in the store since known: a
// sign-in on another replica (or another process on the same SQLite file)
// is used here too, and a sign-out is honoured. It returns what it saw.
func (d *Daemon) followSignIns(ctx context.Context, known map[string]int64) map[string]int64 {
	gens := d.grantGenerations(ctx)
	if gens == nil || known == nil {
		return gens
	}
	d.auth.mu.RLock()
	names := make(map[string]string, len(d.auth.keys))
	for name, key := range d.auth.keys {
		names[name] = key
	}
	d.auth.mu.RUnlock()
	for name, key := range names {
		g, has := gens[key]
		if g == known[key] && has == d.auth.isSignedIn(key) {
			continue
		}
		d.auth.coord.Forget(key)
		d.auth.setSignedIn(key, has)
		if c, ok := d.mgr.Get(name); ok && (!has || c.State() != api.StateReady) {
			d.log.Info("grant changed by another process sharing the state", "server", name, "signed_in", has)
			c.Reconnect()
		}
	}
	return gens
}

// replicaServers is every live replica's view of the servers: this one
// live, the others as last published.
func (d *Daemon) replicaServers(ctx context.Context) []api.ServerStatus {
	out := []api.ServerStatus{}
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
