package proxyd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
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
}

// call is the one funnel every tools/call goes through (MCP clients, the
// CLI, drills): refuse what cannot be sent, forward, classify, record.
func (d *Daemon) call(ctx context.Context, srv, tool string, args json.RawMessage, meta downstream.CallMeta) callOutcome {
	start := time.Now()
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
	// A token refresh during the call shows as a token request counted
	// for the server's grant between start and end.
	grant, refreshesBefore := "", int64(0)
	switch {
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
		if _, known := conn.Tool(tool); !known && conn.State() == api.StateReady {
			out.Err = &callerr.RefusedError{Reason: fmt.Sprintf("server %q has no tool %q (see 'mcpx tools %s')", srv, tool, srv)}
		} else if len(args) > 0 && !validArgs(args) {
			out.Err = &callerr.RefusedError{Reason: "arguments must be a JSON object"}
		} else {
			if transport != config.TransportStreamableHTTP && transport != config.TransportSSE {
				// HTTP transports mark dispatch when a request really goes out.
				rec.MarkDispatched()
			}
			uctx := tcall.StartUpstream(ctx, cfg.URL, conn.Version())
			if m := tcall.PropagationMeta(uctx); m != nil {
				uctx = upstream.WithMeta(uctx, m)
			}
			out.Result, out.Err = conn.CallTool(uctx, tool, args)
			tcall.EndUpstream()
		}
	}
	out.Duration = time.Since(start)
	// A server that is not connected refused the call before dispatch:
	// the classifier's typed refusals say so (and that a sign-in is the
	// fix when it is); the caller still gets the connection's own message.
	in := callerr.Input{Err: out.Err, Facts: rec.Facts(), CallerCtxErr: ctx.Err(), Transport: transport}
	var notReady *upstream.ErrNotReady
	if errors.As(out.Err, &notReady) {
		in.Err = &callerr.UnavailableError{Server: srv, Err: out.Err}
		if notReady.SignIn {
			in.Err = &callerr.AuthError{Reason: fmt.Sprintf("the server requires sign-in (run 'mcpx login %s'); the call was not sent", srv), Err: out.Err}
		}
	}
	if out.Result != nil {
		in.Result = &mcp.CallToolResult{IsError: out.Result.IsError}
	}
	out.Class = callerr.Classify(in)
	status := "ok"
	errText := ""
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
	tokenRefresh := grant != "" && d.auth.coord.TokenRequests(grant) > refreshesBefore
	tcall.End(telemetry.Outcome{Class: out.Class.Class, Domain: out.Class.Domain, HTTPStatus: out.Class.HTTPStatus,
		Message: redact.Text(errText), Reinit: info.Reinit, Retried: info.Retried, TokenRefresh: tokenRefresh})
	d.activity.Add(activity.Record{
		Time:               start,
		Server:             srv,
		Tool:               tool,
		DurationMS:         float64(out.Duration.Microseconds()) / 1000,
		Status:             status,
		Error:              redact.Text(errText),
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
	})
	if ok {
		d.health.Observe(srv, out.Class)
	}
	d.metrics.observeCall(srv, out.Class, out.Duration)
	return out
}

func validArgs(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return string(b) == "null" || len(b) > 0 && b[0] == '{' && json.Valid(b)
}

func toolErrorText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(mcp.TextContent); ok {
			return t.Text
		}
	}
	return "tool returned isError"
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Upstreams implements downstream.Backend.
func (d *Daemon) Upstreams() []downstream.Upstream {
	var out []downstream.Upstream
	for _, c := range d.mgr.List() {
		if c.State() != api.StateReady {
			continue
		}
		cfg := c.Config()
		u := downstream.Upstream{Name: c.Name(), Prefix: cfg.ExposedPrefix(), Modern: c.Era() == upstream.EraModern, Prompts: c.Prompts(), Resources: c.Resources(), Templates: c.ResourceTemplates()}
		for _, t := range c.Tools() {
			u.Tools = append(u.Tools, t.Tool)
		}
		out = append(out, u)
	}
	return out
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

// CallToolRaw implements downstream.RawCaller: the upstream's result JSON
// as it came, or a tool error result carrying the classification.
func (d *Daemon) CallToolRaw(ctx context.Context, srv, tool string, args json.RawMessage, meta downstream.CallMeta) (json.RawMessage, error) {
	out := d.call(ctx, srv, tool, args, meta)
	if out.Err != nil {
		msg := redact.Text(out.Err.Error())
		return json.Marshal(mcp.NewToolResultError(fmt.Sprintf("%s (error_class=%s, fault_domain=%s)", msg, out.Class.Class, out.Class.Domain)))
	}
	return out.Result.Raw, nil
}

// RecordUnknownTool implements downstream.UnknownToolRecorder: the call is
// refused (and recorded against the server it was likely meant for)
// without touching the network.
func (d *Daemon) RecordUnknownTool(ctx context.Context, exposed string, meta downstream.CallMeta) {
	srv, tool, _ := downstream.Owner(exposed, d.prefixes())
	d.call(ctx, srv, tool, nil, meta)
}
