package proxyd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
	"github.com/mcpx-dev/mcpx/proxyd/telemetry"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// callOutcome is one tools/call through proxyd, classified.
type callOutcome struct {
	RequestID string
	Result    *upstream.CallResult
	Err       error
	Class     callerr.Classification
	Duration  time.Duration
	// record, when set, is the call's bookkeeping left to the caller
	// (relayed.answerFirst): run it once the client has the answer.
	record func()
	// answered: the outcome went to relayed.early; nothing is left to do.
	answered bool
}

// relayed is one request through the funnel.
type relayed struct {
	server string
	// method and name: the MCP method and the upstream's name of the tool
	// or prompt (or the resource URI).
	method, name string
	// params are the request's params without _meta once edit, when set,
	// is made (see relay.Exchange.Edit); meta the client's own _meta
	// members, token its progress token.
	params, meta, token json.RawMessage
	edit                *relay.Edit
	index               *relay.Members // lists params' members, or nil
	logLevel            string
	// peer is the client's side (nil: a caller that takes no notifications
	// or requests of the upstream: the CLI without a stream, drills).
	peer relay.Peer
	// args: the arguments were given apart from params and need checking.
	args     json.RawMessage
	callMeta downstream.CallMeta
	// answerFirst: the caller answers the client before the call's
	// bookkeeping, which it runs with callOutcome.record (see answered).
	answerFirst bool
	// early, when set, takes the outcome of a request the relay answers
	// before its upstream call ends (see relay.Request.Answer); funnel
	// then returns an outcome marked answered.
	early func(callOutcome)
	// refused, when set, is why the call was refused before it reached
	// funnel (the client has its answer): it is recorded, never sent.
	refused error
}

// call is a tools/call from proxyd's own callers (the CLI, drills).
func (d *Daemon) call(ctx context.Context, srv, tool string, args json.RawMessage, meta downstream.CallMeta) callOutcome {
	return d.funnel(ctx, &relayed{server: srv, method: string(mcp.MethodToolsCall), name: tool, args: args, callMeta: meta})
}

// funnel is the one path every relayed request takes (MCP clients, the
// CLI, drills): refuse what cannot be sent, relay, and for a tools/call
// classify and record it.
func (d *Daemon) funnel(ctx context.Context, rq *relayed) callOutcome {
	procs.Enter()
	defer procs.Leave()
	if rq.method != string(mcp.MethodToolsCall) {
		return d.relayOther(ctx, rq)
	}
	start := time.Now()
	srv, tool, meta := rq.server, rq.name, rq.callMeta
	if meta.RequestID == "" {
		meta.RequestID = newRequestID()
	}
	ctx, tcall := d.tel.StartCall(ctx, srv, tool, meta.RequestID)
	// A drill passes its own CallInfo to see what session recovery did.
	info := upstream.CallInfoFrom(ctx)
	if info == nil {
		ctx, info = upstream.WithCallInfo(ctx)
	}
	ctx, rec := callerr.WithRecorder(ctx)
	out := callOutcome{RequestID: meta.RequestID}
	conn, ok := d.mgr.Get(srv)
	era := ""
	transport := ""
	stats := &relay.Stats{}
	// A token refresh during the call shows as a token request counted
	// for the server's grant between start and end.
	grant, refreshesBefore := "", int64(0)
	// end classifies and times the outcome, and does its bookkeeping or
	// leaves it to the caller: on the request's goroutine, or on the
	// relay's when it answers the client early.
	end := func() callOutcome {
		out.Duration = time.Since(start)
		status, errText := d.classify(ctx, srv, transport, "call", &out, rec)
		tokenRefresh := grant != "" && d.auth.coord.TokenRequests(grant) > refreshesBefore
		// The bookkeeping: the span's end, the activity record, health and
		// metrics.
		record := func() {
			tcall.End(telemetry.Outcome{Class: out.Class.Class, Domain: out.Class.Domain, HTTPStatus: out.Class.HTTPStatus,
				Message: redact.Text(errText), Reinit: info.Reinit, Retried: info.Retried, TokenRefresh: tokenRefresh})
			d.activity.Add(activity.Record{
				Time:               start,
				Server:             srv,
				Tool:               tool,
				DurationMS:         float64(out.Duration.Microseconds()) / 1000,
				Status:             status,
				Error:              d.secrets.text(errText),
				ErrorClass:         out.Class.Class,
				FaultDomain:        out.Class.Domain,
				UpstreamHTTPStatus: out.Class.HTTPStatus,
				Reason:             out.Class.Reason,
				RequestID:          meta.RequestID,
				Client:             meta.Client,
				ProtocolEra:        era,
				Reinit:             info.Reinit,
				Retried:            info.Retried,
				TokenRefresh:       tokenRefresh,
				Progress:           stats.Progress(),
				Inputs:             inputsText(stats.Inputs()),
			})
			if ok {
				d.health.Observe(srv, out.Class)
			}
			d.metrics.observeCall(srv, out.Class, out.Duration)
		}
		if rq.answerFirst {
			out.record = d.answered.hold(record)
		} else {
			record()
		}
		return out
	}
	switch {
	case rq.refused != nil:
		out.Err = rq.refused
	case !ok && srv == "":
		out.Err = &callerr.RefusedError{Reason: fmt.Sprintf("no server exposes a tool named %q (see 'mcpx tools')", tool)}
	case !ok:
		out.Err = &callerr.RefusedError{Reason: fmt.Sprintf("unknown server %q (see 'mcpx servers')", srv)}
	case conn.Config().Disabled:
		out.Err = &callerr.PolicyError{Reason: fmt.Sprintf("server %q is disabled in the config", srv)}
	default:
		cfg := conn.Config()
		era, transport = conn.Era(), cfg.EffectiveTransport()
		if key, ok := d.auth.grantOf(srv); ok {
			grant, refreshesBefore = key, d.auth.coord.TokenRequests(key)
		}
		if _, has := ctx.Deadline(); !has {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.CallTimeout())
			defer cancel()
		}
		params := rq.params
		if _, known := conn.Tool(tool); !known && conn.State() == api.StateReady {
			out.Err = &callerr.RefusedError{Reason: fmt.Sprintf("server %q has no tool %q (see 'mcpx tools %s')", srv, tool, srv)}
		} else if params == nil && len(rq.args) > 0 && !validArgs(rq.args) {
			out.Err = &callerr.RefusedError{Reason: "arguments must be a JSON object"}
		} else if err := checkArgs(ctx, conn, tool, rq.args); err != nil {
			out.Err = err
		} else {
			if params == nil {
				params, out.Err = upstream.CallParams(tool, rq.args)
			}
			if out.Err == nil {
				if transport != config.TransportStreamableHTTP && transport != config.TransportSSE {
					// HTTP transports mark dispatch when a request really goes out.
					rec.MarkDispatched()
				}
				uctx := tcall.StartUpstream(ctx, cfg.URL, conn.Version())
				if m := tcall.PropagationMeta(uctx); m != nil {
					uctx = upstream.WithMeta(uctx, m)
					rq.meta = telemetry.WithTraceMeta(rq.meta, m)
				}
				req := rq.request(params, stats)
				// got takes the relay's result into the outcome.
				got := func(raw json.RawMessage, err error, ms *relay.Members) {
					tcall.EndUpstream()
					if err == nil {
						out.Result = upstream.ListedCallResult(raw, ms)
					}
					out.Err = d.secrets.err(err) // a stdio child's stderr may echo its env
				}
				if rq.early != nil {
					req.Answer = func(raw json.RawMessage, err error) {
						got(raw, err, nil)
						rq.early(end())
					}
				}
				raw, err := d.relay.Do(uctx, conn, req, peerOrNone(rq.peer))
				if errors.Is(err, relay.ErrAnswered) {
					return callOutcome{answered: true}
				}
				got(raw, err, req.Result)
			}
		}
	}
	return end()
}

// classify sets a relayed request's class from its outcome and the
// recorder's facts, and returns the activity status and error text. A
// server that is not connected refused the request before dispatch: the
// classifier's typed refusals say so (and that a sign-in is the fix when
// it is); the caller still gets the connection's own message. verb names
// what was not sent ("call", "request").
func (d *Daemon) classify(ctx context.Context, srv, transport, verb string, out *callOutcome, rec *callerr.Recorder) (status, errText string) {
	in := callerr.Input{Err: out.Err, Facts: rec.Facts(), CallerCtxErr: ctx.Err(), Transport: transport}
	if in.CallerCtxErr != nil {
		in.CallerCause = context.Cause(ctx) // only an ended context has one
	}
	var notReady *upstream.ErrNotReady
	if errors.As(out.Err, &notReady) {
		in.Err = &callerr.UnavailableError{Server: srv, Err: out.Err}
		if notReady.SignIn {
			in.Err = &callerr.AuthError{Reason: fmt.Sprintf("the server requires sign-in (run 'mcpx login %s'); the %s was not sent", srv, verb), Err: out.Err}
		}
	}
	if out.Result != nil {
		in.Result = &mcp.CallToolResult{IsError: out.Result.IsError}
	}
	out.Class = callerr.Classify(in)
	status = "ok"
	if out.Class.Class != "" {
		status = "error"
	}
	switch {
	case out.Err != nil:
		errText = out.Err.Error()
	case out.Result != nil && out.Result.IsError:
		errText = "tool returned isError"
		if typed, err := out.Result.Typed(); err == nil {
			errText = toolErrorText(typed)
		}
	}
	return status, errText
}

// inputsText is the activity record's form of a call's inputs.
func inputsText(in []relay.Input) string {
	out := make([]activity.Input, len(in))
	for i, x := range in {
		out[i] = activity.Input{Method: x.Method, Action: x.Action}
	}
	return activity.FormatInputs(out)
}

// request is the relay's request for rq with params.
func (rq *relayed) request(params json.RawMessage, stats *relay.Stats) *relay.Request {
	return &relay.Request{
		Exchange:      relay.Exchange{Method: rq.method, Name: rq.name, Params: params, Edit: rq.edit, Index: rq.index, Meta: rq.meta, LogLevel: rq.logLevel},
		ProgressToken: rq.token,
		Stats:         stats,
	}
}

// relayOther relays a request other than tools/call (prompts/get,
// resources/read, completion/complete): not recorded as activity.
func (d *Daemon) relayOther(ctx context.Context, rq *relayed) callOutcome {
	start := time.Now()
	out := callOutcome{}
	conn, ok := d.mgr.Get(rq.server)
	switch {
	case !ok:
		out.Err = fmt.Errorf("unknown server %q", rq.server)
	case conn.Config().Disabled:
		out.Err = fmt.Errorf("server %q is disabled in the config", rq.server)
	default:
		if _, has := ctx.Deadline(); !has {
			var cancel context.CancelFunc
			cfg := conn.Config()
			ctx, cancel = context.WithTimeout(ctx, cfg.CallTimeout())
			defer cancel()
		}
		req := rq.request(rq.params, nil)
		if rq.early != nil {
			req.Answer = func(raw json.RawMessage, err error) { rq.early(otherOutcome(start, raw, err)) }
		}
		raw, err := d.relay.Do(ctx, conn, req, peerOrNone(rq.peer))
		if errors.Is(err, relay.ErrAnswered) {
			return callOutcome{answered: true}
		}
		return otherOutcome(start, raw, err)
	}
	out.Duration = time.Since(start)
	return out
}

// otherOutcome is the outcome of a request other than tools/call.
func otherOutcome(start time.Time, raw json.RawMessage, err error) callOutcome {
	out := callOutcome{Err: err, Duration: time.Since(start)}
	if err == nil {
		out.Result = &upstream.CallResult{Raw: raw}
	}
	return out
}

// noPeer is the client side of a caller that takes no notifications or
// requests: it declares nothing, so the upstream's requests are refused.
type noPeer struct{}

func (noPeer) Modern() bool                   { return false }
func (noPeer) Caps() relay.Caps               { return relay.Caps{} }
func (noPeer) Notify(string, json.RawMessage) {}
func (noPeer) Ask(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no client to ask")
}

func peerOrNone(p relay.Peer) relay.Peer {
	if p == nil {
		return noPeer{}
	}
	return p
}

// Relay implements downstream.Relayer: a tools/call failure that is not
// the upstream's own JSON-RPC error reaches the client as a tool error
// result carrying the classification, so an agent can tell a dead upstream
// from a refused argument.
func (d *Daemon) Relay(ctx context.Context, c *downstream.Call) (json.RawMessage, error) {
	rq := &relayed{server: c.Server, method: c.Method, name: c.Name, params: c.Params, edit: c.Edit, index: c.Index, meta: c.Meta,
		token: c.ProgressToken, logLevel: c.LogLevel, peer: c.Peer, callMeta: c.CallMeta,
		answerFirst: d.activity.Durability() != activity.DurabilitySync}
	if c.Unready {
		// Decided here, not by the funnel: the server may be ready by now,
		// and the name is not one the endpoint serves.
		rq.refused = d.notServed(c.Server, c.Exposed)
	}
	if c.Answer != nil {
		rq.early = func(out callOutcome) {
			res, err := clientAnswer(c, out)
			c.Answer(res, err, out.record)
		}
	}
	out := d.funnel(ctx, rq)
	if out.answered {
		return nil, relay.ErrAnswered
	}
	c.Then = out.record
	return clientAnswer(c, out)
}

// clientAnswer is what the client of c gets for out.
func clientAnswer(c *downstream.Call, out callOutcome) (json.RawMessage, error) {
	if out.Err == nil {
		return out.Result.Raw, nil
	}
	if rpc, ok := relay.IsRPCError(out.Err); ok {
		return nil, rpc
	}
	msg := redact.Text(out.Err.Error())
	if c.Method != string(mcp.MethodToolsCall) {
		return nil, errors.New(msg)
	}
	res, err := json.Marshal(mcp.NewToolResultError(fmt.Sprintf("%s (error_class=%s, fault_domain=%s)", msg, out.Class.Class, out.Class.Domain)))
	if err != nil {
		return nil, err
	}
	if c.Peer != nil && c.Peer.Modern() {
		res = relay.ModernResult(res)
	}
	return res, nil
}

func validArgs(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return string(b) == "null" || len(b) > 0 && b[0] == '{' && relay.Valid(b)
}

func toolErrorText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			return t.Text
		}
	}
	return "tool returned isError"
}

// newRequestID names a call for its activity record and trace. It is no
// secret: the runtime's generator (per thread, no system call) will do.
func newRequestID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// Upstreams implements downstream.Backend.
func (d *Daemon) Upstreams() []downstream.Upstream {
	var out []downstream.Upstream
	conns := d.mgr.List()
	d.endpointTools.forget(conns)
	for _, c := range conns {
		if c.State() != api.StateReady {
			continue
		}
		cfg := c.Config()
		out = append(out, downstream.Upstream{Name: c.Name(), Prefix: cfg.ExposedPrefix(), Modern: c.Era() == upstream.EraModern,
			Tools: d.endpointTools.of(c), Prompts: c.Prompts(), Resources: c.Resources(), Templates: c.ResourceTemplates()})
	}
	return out
}

// endpointTools keeps each connection's tools as the endpoint takes them,
// converted once per listing rather than on every publish (a copy of
// every tool: megabytes for an upstream with thousands).
type endpointTools struct {
	mu sync.Mutex
	m  map[string]convertedTools
}

type convertedTools struct {
	from []upstream.Tool // the listing converted (compared by identity)
	to   []downstream.Tool
}

func (e *endpointTools) of(c *upstream.Conn) []downstream.Tool {
	ts := c.Tools()
	e.mu.Lock()
	defer e.mu.Unlock()
	// A listing is never changed in place: a new one is a new slice.
	if ct, ok := e.m[c.Name()]; ok && len(ct.from) == len(ts) && (len(ts) == 0 || &ct.from[0] == &ts[0]) {
		return ct.to
	}
	to := make([]downstream.Tool, len(ts))
	for i, t := range ts {
		to[i] = downstream.Tool{Tool: t.Tool, Hash: t.Hash, ParamHeaders: t.ParamHeaders}
	}
	if e.m == nil {
		e.m = map[string]convertedTools{}
	}
	e.m[c.Name()] = convertedTools{from: ts, to: to}
	return to
}

// forget drops the tools of servers no longer configured: one pass over
// each, as a publish runs it with every server.
func (e *endpointTools) forget(conns []*upstream.Conn) {
	live := make(map[string]struct{}, len(conns))
	for _, c := range conns {
		live[c.Name()] = struct{}{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name := range e.m {
		if _, ok := live[name]; !ok {
			delete(e.m, name)
		}
	}
}

// CallTool implements downstream.Backend: failures reach the MCP client as
// a tool error result carrying the classification, so an agent can tell a
// dead upstream from a refused argument.
func (d *Daemon) CallTool(ctx context.Context, srv, tool string, args json.RawMessage, meta downstream.CallMeta) (*mcp.CallToolResult, error) {
	out := d.call(ctx, srv, tool, args, meta)
	if out.Err != nil {
		msg := redact.Text(out.Err.Error())
		return mcp.NewToolResultError(fmt.Sprintf("%s (error_class=%s, fault_domain=%s)", msg, out.Class.Class, out.Class.Domain)), nil
	}
	return out.Result.Typed()
}

// GetPrompt implements downstream.Backend.
func (d *Daemon) GetPrompt(ctx context.Context, srv string, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return nil, fmt.Errorf("unknown server %q", srv)
	}
	return c.GetPrompt(ctx, req)
}

// ReadResource implements downstream.Backend.
func (d *Daemon) ReadResource(ctx context.Context, srv string, req mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return nil, fmt.Errorf("unknown server %q", srv)
	}
	return c.ReadResource(ctx, req)
}

// RecordUnknownTool implements downstream.UnknownToolRecorder: the call the
// library refused is recorded against the server it was likely meant for,
// and never sent. The upstream may well know the name after the prefix
// (its own name of a tool exposed under a shortened one, or a tool of a
// server that is not ready), which is why funnel must not be left to
// decide.
func (d *Daemon) RecordUnknownTool(ctx context.Context, exposed string, meta downstream.CallMeta) {
	srv, tool, _ := downstream.Owner(exposed, d.prefixes())
	d.funnel(ctx, &relayed{server: srv, method: string(mcp.MethodToolsCall), name: tool, callMeta: meta,
		refused: d.notServed(srv, exposed)})
}

// UnreadyOwner implements downstream.UnreadyOwner: a name under the prefix
// of a configured server that is not ready (connecting, error, waiting
// for a sign-in) is that server's; its call is refused before dispatch
// with the server's state and last error (see Relay).
func (d *Daemon) UnreadyOwner(exposed string) (server, tool string, ok bool) {
	srv, tool, ok := downstream.Owner(exposed, d.prefixes())
	if !ok {
		return "", "", false
	}
	if c, configured := d.mgr.Get(srv); !configured || c.NotReady() == nil {
		return "", "", false // ready: the name is just not one of its tools
	}
	return srv, tool, true
}

// UnreadyServers names the configured servers that are not ready, with
// their state ("docs (error)"), for a refusal that may be theirs (see
// downstream.UnreadyLister).
func (d *Daemon) UnreadyServers() []string {
	var out []string
	for _, c := range d.mgr.List() {
		if c.NotReady() != nil {
			out = append(out, fmt.Sprintf("%s (%s)", c.Name(), c.State()))
		}
	}
	return out
}

// notServed is why a call of exposed, a name the endpoint does not serve,
// is not sent to srv, its likely server: the server's own error while it
// is not ready (classified as the server's unavailability, or a sign-in
// needed), else a refusal naming the name.
func (d *Daemon) notServed(srv, exposed string) error {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return &callerr.RefusedError{Reason: fmt.Sprintf("no server exposes a tool named %q (see 'mcpx tools')", exposed)}
	}
	if err := c.NotReady(); err != nil {
		return err
	}
	return &callerr.RefusedError{Reason: fmt.Sprintf("server %q exposes no tool named %q (see 'mcpx tools %s')", srv, exposed, srv)}
}

// SetLevel implements downstream.LevelSetter: a client's logging/setLevel
// reaches every legacy upstream (see upstream.Conn.WantLevel) before the
// client is answered, so the level holds for its next request.
func (d *Daemon) SetLevel(level string) {
	var wg sync.WaitGroup
	for _, c := range d.mgr.List() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.WantLevel(ctx, level)
		}()
	}
	wg.Wait()
}

// RootsChanged implements downstream.RootsNotifier.
func (d *Daemon) RootsChanged(srv string) {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.RootsChanged(ctx); err != nil {
		d.log.Debug("notifications/roots/list_changed", "server", srv, "err", err)
	}
}

// Subscribe implements downstream.Subscriber.
func (d *Daemon) Subscribe(ctx context.Context, srv, uri string) error {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return fmt.Errorf("unknown server %q", srv)
	}
	return c.Subscribe(ctx, uri)
}

// Unsubscribe implements downstream.Subscriber.
func (d *Daemon) Unsubscribe(srv, uri string) {
	c, ok := d.mgr.Get(srv)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Unsubscribe(ctx, uri)
}
