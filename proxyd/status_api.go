package proxyd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/mcpx-dev/mcpx/internal/errtext"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// status answers once the endpoint has published the servers that are
// ready (see awaitListed).
func (d *Daemon) status(ctx context.Context) api.Status {
	d.awaitListed(ctx)
	s := api.Status{
		Running:       true,
		Version:       d.opts.Version,
		PID:           os.Getpid(),
		StartedAt:     d.started,
		UptimeSeconds: time.Since(d.started).Seconds(),
		Socket:        d.opts.Socket,
		Listen:        d.listen,
		MCPURL:        "http://" + d.listen + "/mcp",
		ConfigPath:    d.opts.ConfigPath,
		StateDir:      d.opts.StateDir,
		StateDB:       d.db.Engine() + ":" + d.db.Path(),
		Replica:       d.opts.Replica,
		MetricsListen: d.metricsAddr,
		Stopping:      d.stopping(),
		Servers:       []api.ServerStatus{},
	}
	d.cfgMu.RLock()
	if d.cfgErr != nil {
		s.ConfigError = d.secrets.text(d.cfgErr.Error())
	}
	d.cfgMu.RUnlock()
	for _, c := range d.mgr.List() {
		s.Servers = append(s.Servers, d.serverStatus(c))
	}
	return s
}

func (d *Daemon) serverStatus(c *upstream.Conn) api.ServerStatus {
	st := c.Status()
	d.readyIfListed(c, &st)
	st.LastError = d.secrets.text(errtext.Dedupe(st.LastError))
	// The endpoint's naming as of its last sync: working it out again would
	// cost in proportion to every server's tools, on every status.
	st.Warnings = d.down.Naming().OmittedBy(c.Name())
	h := d.health.Snapshot(c.Name())
	st.Health = &api.Health{Calls: h.Calls, Failed: h.Failed, DominantClass: h.DominantClass, Degraded: h.Degraded, Summary: h.Summary}
	if st.State == api.StateReady && h.Degraded {
		st.State = api.StateDegraded
		st.Summary = h.Summary
	}
	return st
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) error {
	d.answered.wait(r.Context()) // health counts the calls answered so far
	return writeJSON(w, d.status(r.Context()))
}

func (d *Daemon) handleTools(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	out := []api.Tool{}
	found := want == ""
	naming := d.naming()
	for _, c := range d.mgr.List() {
		if want != "" && c.Name() != want {
			continue
		}
		found = true
		cfg := c.Config()
		// The endpoint serves the tools of ready servers only; another
		// state keeps the tools last listed, which clients do not see.
		state := c.State()
		for _, t := range c.Tools() {
			tool := api.Tool{
				Server: c.Name(), Name: t.Name, Exposed: downstream.ExposedName(c.Name(), cfg.ExposedPrefix(), t.Name),
				Title: t.Title, Description: t.Description, ReadOnly: t.ReadOnly(), Destructive: t.Destructive(),
				InputSchema: t.RawInputSchema,
			}
			tool.LeftOut = leftOut(c.Name(), state, naming.Tools, tool.Exposed, t.Name)
			out = append(out, tool)
		}
	}
	if !found {
		return d.noServer(want)
	}
	return writeJSON(w, out)
}

// leftOut says why clients do not see what server lists as name, exposed
// as exposed, when they do not ("" when they do): the endpoint serves
// ready servers only, and a name two servers would expose is the first's
// (held: the naming of tools or of prompts).
func leftOut(server string, state api.State, held map[string]downstream.Entry, exposed, name string) string {
	if state != api.StateReady {
		return notServed(server, state)
	}
	if e, ok := held[exposed]; ok && e != (downstream.Entry{Server: server, Name: name}) {
		return "the name is already exposed by server " + e.Server
	}
	return ""
}

// resourceLeftOut is leftOut for a resource URI (held: the naming's
// Resources), which no prefix tells apart.
func resourceLeftOut(server string, state api.State, held map[string]string, uri string) string {
	if state != api.StateReady {
		return notServed(server, state)
	}
	if h, ok := held[uri]; ok && h != server {
		return "the URI is already served by server " + h
	}
	return ""
}

func notServed(server string, state api.State) string {
	return fmt.Sprintf("not served while %s is %s (see 'mcpx status %s')", server, state.Phrase(), server)
}

func (d *Daemon) handleReload(w http.ResponseWriter, r *http.Request) error {
	res, err := d.reload()
	if err != nil {
		return invalidConfig("config not reloaded, the running configuration stays: %v", err)
	}
	return writeJSON(w, res)
}

func (d *Daemon) handleShutdown(w http.ResponseWriter, r *http.Request) error {
	if err := writeJSON(w, api.ShutdownResponse{Status: "stopping"}); err != nil {
		return err
	}
	d.requestShutdown()
	return nil
}

func (d *Daemon) handleConnectInfo(w http.ResponseWriter, r *http.Request) error {
	exe, err := os.Executable()
	if err != nil {
		exe = "mcpx"
	}
	return writeJSON(w, api.ConnectInfo{
		URL:          "http://" + d.listen + "/mcp",
		Header:       "Authorization: Bearer " + d.token,
		TokenFile:    d.opts.StateDir + "/" + TokenFile,
		StdioCommand: []string{exe, "--socket", d.opts.Socket, "stdio"},
	})
}

// handleHealth answers for every live replica sharing the state: this
// one's servers live, the others' as they last published them.
func (d *Daemon) handleHealth(w http.ResponseWriter, r *http.Request) error {
	d.answered.wait(r.Context())
	want := r.URL.Query().Get("server")
	replicas := api.SplitList(r.URL.Query()["replica"])
	out := []api.ServerStatus{}
	known := false
	for _, st := range d.replicaServers(r.Context()) {
		if want != "" && st.Name != want {
			continue
		}
		known = true
		if len(replicas) == 0 || slices.Contains(replicas, st.Replica) {
			out = append(out, st)
		}
	}
	if want != "" && !known {
		return d.noServer(want)
	}
	return writeJSON(w, out)
}
