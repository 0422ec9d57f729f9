package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// The command line's resources, prompts and any-method requests: lists
// from each connection's current view, requests relayed through the same
// upstream connection as MCP clients' and recorded in the activity log.

func (d *Daemon) handleResources(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	out := []api.Resource{}
	found := want == ""
	naming := d.naming()
	for _, c := range d.mgr.List() {
		if want != "" && c.Name() != want {
			continue
		}
		found = true
		state := c.State()
		for _, res := range c.Resources() {
			x := api.Resource{Server: c.Name(), URI: res.URI, Name: res.Name, Title: res.Title, Description: res.Description, MimeType: res.MIMEType,
				LeftOut: resourceLeftOut(c.Name(), state, naming.Resources, res.URI)}
			if res.Size != nil {
				x.Size = int64(*res.Size)
			}
			out = append(out, x)
		}
		for _, t := range c.ResourceTemplates() {
			x := api.Resource{Server: c.Name(), Name: t.Name, Title: t.Title, Description: t.Description, MimeType: t.MIMEType}
			if t.URITemplate != nil {
				x.URITemplate = t.URITemplate.Raw()
			}
			out = append(out, x)
		}
	}
	if !found {
		return d.noServer(want)
	}
	return writeJSON(w, out)
}

func (d *Daemon) handlePrompts(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	out := []api.Prompt{}
	found := want == ""
	naming := d.naming()
	for _, c := range d.mgr.List() {
		if want != "" && c.Name() != want {
			continue
		}
		found = true
		cfg := c.Config()
		state := c.State()
		for _, p := range c.Prompts() {
			x := api.Prompt{Server: c.Name(), Name: p.Name, Exposed: downstream.ExposedName(c.Name(), cfg.ExposedPrefix(), p.Name),
				Title: p.Title, Description: p.Description}
			x.LeftOut = leftOut(c.Name(), state, naming.Prompts, x.Exposed, p.Name)
			for _, a := range p.Arguments {
				x.Arguments = append(x.Arguments, api.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
			}
			out = append(out, x)
		}
	}
	if !found {
		return d.noServer(want)
	}
	return writeJSON(w, out)
}

// handleRPC sends one request of any method to a server. tools/call goes
// through the call funnel like 'mcpx call'; other methods are relayed and
// recorded the same way (the record's tool is "METHOD NAME").
func (d *Daemon) handleRPC(w http.ResponseWriter, r *http.Request) error {
	var req api.RPCRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case req.Method == "":
		return badRequest("method is required")
	case req.Method == string(mcp.MethodInitialize) || strings.HasPrefix(req.Method, "notifications/"):
		return badRequest("%s belongs to proxyd's own connection: send a request method (see 'mcpx rpc --help')", req.Method)
	}
	var params map[string]json.RawMessage
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &params); err != nil || params == nil {
			return badRequest("params must be a JSON object")
		}
	}
	var conn *upstream.Conn
	var adhoc *config.Server
	if req.Target != nil {
		s, err := adHocServer(*req.Target)
		if err != nil {
			return badRequest("%v", err)
		}
		adhoc, req.Server = &s, s.Name
	} else {
		c, ok := d.mgr.Get(req.Server)
		if !ok {
			return d.noServer(req.Server)
		}
		conn = c
	}
	ctx := r.Context()
	timeout := config.DefaultCallTimeout
	if conn != nil {
		cfg := conn.Config()
		timeout = cfg.CallTimeout()
	}
	ctx, cancel := withCallerTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond, timeout)
	defer cancel()
	// _meta members pass on as the client's own; the name is what the
	// Mcp-Name header carries.
	meta := params["_meta"]
	delete(params, "_meta")
	var name string
	for _, k := range []string{"name", "uri"} {
		if v, ok := params[k]; ok {
			_ = json.Unmarshal(v, &name)
			break
		}
	}
	var body json.RawMessage
	if params != nil {
		body, _ = json.Marshal(params)
	}
	var out callOutcome
	if adhoc != nil {
		out = d.relayAdHoc(ctx, *adhoc, req.Method, name, body, meta)
	} else if req.Method == string(mcp.MethodToolsCall) {
		out = d.funnel(ctx, &relayed{server: req.Server, method: req.Method, name: name, params: body, meta: meta,
			callMeta: downstream.CallMeta{Client: "cli"}})
	} else {
		out = d.relayRecorded(ctx, conn, req.Method, name, body, meta)
	}
	resp := api.RPCResponse{RequestID: out.RequestID, Server: req.Server, Method: req.Method,
		DurationMS: float64(out.Duration.Microseconds()) / 1000}
	if out.Result != nil {
		resp.Result = out.Result.Raw
	}
	if out.Err != nil {
		resp.Error = callError(out)
		// An upstream's refusal of a prompt or resource it does not list
		// (nor, for a resource, match a template of) is a missing name, as
		// a tool's is. An ad-hoc target has no lists to tell by.
		var rpcErr *upstream.RPCError
		if conn != nil && errors.As(out.Err, &rpcErr) {
			switch {
			case req.Method == string(mcp.MethodPromptsGet) && !promptKnown(conn, name):
				resp.Error.NotFound = "prompt"
			case req.Method == string(mcp.MethodResourcesRead) && !resourceKnown(conn, name):
				resp.Error.NotFound = "resource"
				resp.Error.Message = withHint(resp.Error.Message, resourceHint(conn, name))
			}
		}
		if req.Method == string(mcp.MethodToolsCall) && adhoc == nil {
			d.markMissing(resp.Error, req.Server, name, name) // as for mcpx call
		}
	}
	return writeJSON(w, resp)
}

func promptKnown(c *upstream.Conn, name string) bool {
	for _, p := range c.Prompts() {
		if p.Name == name {
			return true
		}
	}
	return false
}

// resourceKnown: the server lists uri, or one of its templates matches it.
func resourceKnown(c *upstream.Conn, uri string) bool {
	for _, r := range c.Resources() {
		if r.URI == uri {
			return true
		}
	}
	for _, t := range c.ResourceTemplates() {
		if downstream.TemplateMatches(t.URITemplate, uri) {
			return true
		}
	}
	return false
}

// resourceHint is the did-you-mean for a resource the server does not
// list: the nearest URI it does.
func resourceHint(c *upstream.Conn, uri string) string {
	var uris []string
	for _, r := range c.Resources() {
		uris = append(uris, r.URI)
	}
	return editdistance.DidYouMean(uri, uris)
}

// relayRecorded relays a request other than tools/call for the command
// line, classified and recorded like a call.
func (d *Daemon) relayRecorded(ctx context.Context, conn *upstream.Conn, method, name string, params, meta json.RawMessage) callOutcome {
	start := time.Now()
	out := callOutcome{RequestID: newRequestID()}
	ctx, info := upstream.WithCallInfo(ctx)
	ctx, rec := callerr.WithRecorder(ctx)
	cfg := conn.Config()
	transport := cfg.EffectiveTransport()
	if cfg.Disabled {
		out.Err = &callerr.PolicyError{Reason: fmt.Sprintf("server %q is disabled in the config", conn.Name())}
	} else {
		if transport != config.TransportStreamableHTTP && transport != config.TransportSSE {
			rec.MarkDispatched()
		}
		var raw json.RawMessage
		raw, out.Err = d.relay.Do(ctx, conn, &relay.Request{Exchange: relay.Exchange{Method: method, Name: name, Params: params, Meta: meta}}, noPeer{})
		if out.Err == nil {
			out.Result = &upstream.CallResult{Raw: raw}
		}
		out.Err = d.secrets.err(out.Err) // a stdio child's stderr may echo its env
	}
	out.Duration = time.Since(start)
	// Recorded, not counted in health: the window is of tool calls (a
	// request a server does not support, say, is no sign it fails).
	d.recordRelayed(ctx, conn.Name(), conn.Era(), transport, method, name, start, &out, rec, info)
	return out
}

// recordRelayed classifies a relayed request's outcome and records it in
// the activity log and the metrics, as the funnel does for calls.
func (d *Daemon) recordRelayed(ctx context.Context, server, era, transport, method, name string, start time.Time, out *callOutcome, rec *callerr.Recorder, info *upstream.CallInfo) {
	tool, other := strings.TrimSpace(method+" "+name), method
	if method == string(mcp.MethodToolsCall) {
		tool, other = name, ""
		if out.Result != nil {
			out.Result = upstream.NewCallResult(out.Result.Raw)
		}
	}
	status, errText := d.classify(ctx, server, transport, "request", out, rec)
	d.activity.Add(activity.Record{
		Time: start, Server: server, Tool: tool,
		DurationMS: float64(out.Duration.Microseconds()) / 1000, Status: status, Error: d.secrets.text(errText),
		ErrorClass: out.Class.Class, FaultDomain: out.Class.Domain, UpstreamHTTPStatus: out.Class.HTTPStatus, Reason: out.Class.Reason,
		RequestID: out.RequestID, Client: "cli", ProtocolEra: era, Reinit: info.Reinit, Retried: info.Retried, Method: other,
	})
	d.metrics.observeCall(server, out.Class, out.Duration)
}

// relayAdHoc connects to a server outside the configuration for one
// request, relays it and records it under the ad-hoc server's name.
func (d *Daemon) relayAdHoc(ctx context.Context, s config.Server, method, name string, params, meta json.RawMessage) callOutcome {
	start := time.Now()
	conn, closeConn, err := d.mgr.Dial(ctx, s)
	if err != nil {
		out := callOutcome{RequestID: newRequestID(), Err: &callerr.UnavailableError{Server: s.Name, Err: err}}
		out.Duration = time.Since(start)
		ctx, info := upstream.WithCallInfo(ctx)
		ctx, rec := callerr.WithRecorder(ctx)
		d.recordRelayed(ctx, s.Name, "", s.EffectiveTransport(), method, name, start, &out, rec, info)
		return out
	}
	defer closeConn()
	return d.relayRecorded(ctx, conn, method, name, params, meta)
}

// adHocServer is the server of a one-shot target, named after its host
// or program ("adhoc-example-com", "adhoc-npx").
func adHocServer(t api.AdHocTarget) (config.Server, error) {
	var s config.Server
	switch {
	case t.URL != "" && len(t.Command) > 0:
		return s, errors.New("an ad-hoc target is a URL or a command, not both")
	case t.URL != "":
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, errors.New("an ad-hoc URL must be an absolute http:// or https:// URL")
		}
		s = config.Server{Name: adHocName(u.Hostname()), URL: t.URL}
	case len(t.Command) > 0:
		s = config.Server{Name: adHocName(filepath.Base(t.Command[0])), Command: t.Command[0], Args: t.Command[1:]}
	default:
		return s, errors.New("an ad-hoc target needs a URL or a command")
	}
	if err := (&config.Config{Servers: []config.Server{s}}).Validate(); err != nil {
		return s, err
	}
	return s, nil
}

var notName = regexp.MustCompile(`[^a-z0-9]+`)

func adHocName(from string) string {
	n := strings.Trim(notName.ReplaceAllString(strings.ToLower(from), "-"), "-")
	if n == "" {
		n = "server"
	}
	if len(n) > 24 {
		n = strings.Trim(n[:24], "-")
	}
	return "adhoc-" + n
}
