package probe

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// mcpFacts is the data of the mcp step.
type mcpFacts struct {
	Era             string   `json:"era"`
	ProtocolVersion string   `json:"protocol_version"`
	ServerName      string   `json:"server_name"`
	ServerVersion   string   `json:"server_version"`
	Capabilities    []string `json:"capabilities"`
	SessionID       bool     `json:"session_id"`
	Tools           *int     `json:"tools,omitempty"`
	Tried           []string `json:"tried"`
	UnknownSession  string   `json:"unknown_session,omitempty"`
}

func (r *runner) httpAndMCPSteps(ctx context.Context) {
	r.buildClient()
	start := time.Now()
	c, err := r.newMCPClient()
	if err != nil {
		r.fail(StepHTTP, start, Result{Code: CodeInvalidTarget, Message: clean(err.Error()), Hint: "check the URL and --transport"}, nil)
		return
	}
	defer c.Close()

	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var initRes *mcp.InitializeResult
	err = c.Start(ctx)
	if err == nil {
		initRes, err = c.Initialize(sctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ClientInfo: mcp.Implementation{Name: "mcpx-probe", Version: clientVersion},
		}})
	}
	exchanges, redirects := r.rec.snapshot()

	// The http step is the first exchange of the MCP negotiation: no
	// extra request, and its timing is that exchange's.
	first := firstResponse(exchanges)
	var httpDur time.Duration
	if first != nil {
		httpDur = time.Duration(first.DurationMS * float64(time.Millisecond))
	}
	ok := r.httpStep(ctx, first, redirects, err, httpDur)
	if first != nil {
		r.place(StepHTTP, first.start)
	}
	if !ok {
		return
	}
	mcpStart := start.Add(httpDur)

	protected := unauthorized(exchanges)
	switch {
	case protected != nil:
		msg := fmt.Sprintf("the server requires authorization (HTTP %d)", protected.Status)
		if r.opts.BearerToken != "" || hasHeader(r.opts.Headers, "Authorization") {
			msg = fmt.Sprintf("the server refused the credentials sent (HTTP %d)", protected.Status)
		}
		r.add(StepMCP, StatusSkip, time.Time{}, msg+"; see the auth step", nil)
		r.authStep(ctx, protected)
		return
	case err != nil:
		r.mcpFailure(mcpStart, err, exchanges)
		r.add(StepAuth, StatusSkip, time.Time{}, "skipped after "+r.result.Code, nil)
		return
	}

	facts := mcpFacts{
		ProtocolVersion: initRes.ProtocolVersion,
		ServerName:      clean(initRes.ServerInfo.Name),
		ServerVersion:   clean(initRes.ServerInfo.Version),
		Capabilities:    capabilityNames(initRes.Capabilities),
		SessionID:       c.GetSessionId() != "",
		Tried:           triedMethods(exchanges),
	}
	facts.Era = "legacy"
	if mcp.IsModernProtocol(initRes.ProtocolVersion) {
		facts.Era = "modern"
	}
	status := StatusOK
	var notes []string
	if r.opts.Protocol == ProtocolModern && facts.Era != "modern" {
		r.fail(StepMCP, mcpStart, Result{Code: CodeNotMCP, Reason: "protocol",
			Message: fmt.Sprintf("the server does not speak protocol %s: it answered the legacy handshake with %s", mcp.LATEST_PROTOCOL_VERSION, initRes.ProtocolVersion),
			Hint:    "probe with --protocol auto or --protocol legacy; clients that require the modern era cannot use this server"}, facts)
		r.add(StepAuth, StatusSkip, time.Time{}, "not protected", nil)
		return
	}
	if initRes.Capabilities.Tools != nil {
		lctx, lcancel := context.WithTimeout(ctx, r.opts.Timeout)
		tools, lerr := c.ListTools(lctx, mcp.ListToolsRequest{})
		lcancel()
		if lerr != nil {
			status = StatusWarn
			notes = append(notes, "tools/list failed: "+clean(lerr.Error()))
		} else {
			n := len(tools.Tools)
			facts.Tools = &n
		}
	}
	if facts.Era == "legacy" && facts.SessionID {
		verdict, warn := r.unknownSessionCheck(ctx, initRes.ProtocolVersion)
		facts.UnknownSession = verdict
		if warn {
			status = StatusWarn
			notes = append(notes, verdict)
		}
	}
	detail := fmt.Sprintf("%s era, protocol %s, server %q %s", facts.Era, facts.ProtocolVersion, facts.ServerName, facts.ServerVersion)
	if facts.Tools != nil {
		detail += fmt.Sprintf(", %d tools", *facts.Tools)
	}
	if facts.SessionID {
		detail += ", session id issued"
	} else {
		detail += ", no session id"
	}
	if len(facts.Tried) > 1 {
		detail += " (tried " + strings.Join(facts.Tried, ", ") + ")"
	}
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	r.add(StepMCP, status, mcpStart, detail, facts)
	// A 4xx on the first request was one era's negotiation being refused;
	// the handshake that followed succeeded, so HTTP is fine.
	for i := range r.steps {
		if s := &r.steps[i]; s.ID == StepHTTP && s.Status == StatusWarn {
			s.Status = StatusOK
			s.Detail += " (refused by this era; the next handshake succeeded)"
		}
	}
	r.add(StepAuth, StatusSkip, time.Time{}, "not protected: the server answered without authorization", nil)
	hint := hintOK
	switch {
	case r.opts.ServerName != "" && r.opts.CAOnlyHere:
		hint = fmt.Sprintf("healthy with --ca-file only: proxyd does not trust that CA for %s; set `tls: {ca_file: %s}` on it in the config, then `mcpx reload`",
			r.opts.ServerName, r.opts.CAFile)
	case r.opts.ServerName != "":
		hint = fmt.Sprintf("healthy: `mcpx tools %s` lists its tools through proxyd", r.opts.ServerName)
	}
	r.setResult(Result{Code: CodeOK,
		Message: fmt.Sprintf("MCP endpoint answered: %s %s, protocol %s", facts.ServerName, facts.ServerVersion, facts.ProtocolVersion),
		Hint:    hint})
}

// firstResponse is the first exchange that is not a followed redirect.
func firstResponse(ex []*exchange) *exchange {
	for _, e := range ex {
		if e.err == nil && e.Status >= 300 && e.Status < 400 && e.Location != "" && e != ex[len(ex)-1] {
			continue
		}
		return e
	}
	return nil
}

// unauthorized finds the exchange that shows the server is protected: a
// 401, or a 403 with a Bearer challenge (insufficient_scope).
func unauthorized(ex []*exchange) *exchange {
	for _, e := range ex {
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden && bearerChallenged(e) {
			return e
		}
	}
	return nil
}

func bearerChallenged(e *exchange) bool {
	cs, _ := discovery.ParseWWWAuthenticate(e.wwwAuth)
	return discovery.BearerChallenge(cs) != nil
}

func triedMethods(ex []*exchange) []string {
	var out []string
	for _, e := range ex {
		if e.RPC == "" {
			continue
		}
		s := e.RPC + " → "
		switch {
		case e.err != nil:
			s += "error"
		default:
			s += fmt.Sprintf("HTTP %d", e.Status)
		}
		out = append(out, s)
	}
	return out
}

func capabilityNames(c mcp.ServerCapabilities) []string {
	var out, extra []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	add(c.Tools != nil, "tools")
	add(c.Resources != nil, "resources")
	add(c.Prompts != nil, "prompts")
	add(c.Logging != nil, "logging")
	add(c.Completions != nil, "completions")
	add(c.Tasks != nil, "tasks")
	for k := range c.Experimental {
		extra = append(extra, "experimental:"+k)
	}
	for k := range c.Extensions {
		extra = append(extra, "extension:"+k)
	}
	sort.Strings(extra) // map order is random
	return append(out, extra...)
}

// isRPCContent reports a content type an MCP endpoint answers with.
func isRPCContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/event-stream" || strings.HasSuffix(mt, "+json")
}

var titleRE = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

// bodyGist is a short, printable summary of a body.
func bodyGist(e *exchange) string {
	b := e.body.String()
	if m := titleRE.FindStringSubmatch(b); m != nil {
		return strings.TrimSpace(clean(m[1]))
	}
	b = strings.TrimSpace(clean(b))
	if len(b) > 120 {
		b = b[:120] + "…"
	}
	return b
}

// httpStep judges the first response. It returns false after a hard
// failure.
func (r *runner) httpStep(ctx context.Context, first *exchange, redirects []redirectHop, mcpErr error, dur time.Duration) bool {
	start := time.Now().Add(-dur)
	data := map[string]any{}
	if len(redirects) > 0 {
		data["redirects"] = redirects
	}
	if first == nil {
		// The request never left: nothing but the library's error to go on.
		res := classifyOr(mcpErr, Result{Code: CodeNotMCP, Hint: "check the URL and --transport"})
		r.fail(StepHTTP, start, res, nil)
		return false
	}
	data["request"] = first
	if first.err != nil {
		res := classifyOr(first.err, Result{Code: CodeConnectionUnreachable, Reason: ReasonOther,
			Hint: "the HTTP exchange failed below HTTP: check the network path"})
		if res.Code == CodeConnectionUnreachable && res.Message == "" || res.Reason == ReasonClosed || res.Reason == ReasonReset {
			res.Message = fmt.Sprintf("%s %s failed: %s", first.Method, first.URL, clean(first.err.Error()))
		}
		if r.clientCertRequested && (res.Code == CodeConnectionUnreachable || res.Code == CodeTLSProtocol) {
			// TLS 1.3 finishes the client's handshake before the server
			// checks the certificate; its refusal arrives as an alert or
			// just a closed connection on the first request.
			res = alertResult(alertCertificateRequired)
			res.Message = "the server requires a client certificate and closed the connection when none was sent"
		}
		if r.target.Scheme == "http" && (res.Code == CodeConnectionUnreachable) && r.speaksTLS(ctx) {
			res = r.plainToTLS(0)
		}
		if res.Code == CodeTimeout {
			res.Message = fmt.Sprintf("no HTTP response within %s", r.opts.Timeout)
			res.Hint = "the server accepted the connection but did not answer: check the server's health, or raise --timeout"
		}
		r.fail(StepHTTP, start, res, data)
		return false
	}
	summary := fmt.Sprintf("%s %s→ %d %s", first.Method, first.RPC+" ", first.Status, http.StatusText(first.Status))
	if first.RPC == "" {
		summary = fmt.Sprintf("%s → %d %s", first.Method, first.Status, http.StatusText(first.Status))
	}
	if first.ContentType != "" {
		summary += ", " + clean(first.ContentType)
	}
	summary += ", " + first.Proto
	if first.Server != "" {
		summary += fmt.Sprintf(", server %q", clean(first.Server))
	}
	var followed int
	for _, h := range redirects {
		if h.Refused == "" {
			followed++
		}
	}
	if followed > 0 {
		summary += fmt.Sprintf(", %d redirect(s) followed", followed)
	}
	st := first.Status
	rpcBody := isRPCContent(first.ContentType)
	switch {
	case st >= 300 && st < 400:
		var refused *redirectHop
		for i := range redirects {
			if redirects[i].Refused != "" {
				refused = &redirects[i]
			}
		}
		res := Result{Code: CodeHTTPStatus, HTTPStatus: st, Reason: ReasonRedirectRefused,
			Message: fmt.Sprintf("HTTP %d redirect to %s", st, first.Location)}
		if refused != nil {
			res.Message += " refused: " + refused.Refused
			res.Hint = fmt.Sprintf("if you trust it, probe and configure the final URL directly: %s", refused.To)
		} else {
			res.Hint = "the redirect has no usable Location: fix the server or use the final URL"
		}
		r.fail(StepHTTP, start, res, data)
		return false
	case st == http.StatusUnauthorized, st == http.StatusForbidden && bearerChallenged(first):
		r.add(StepHTTP, StatusOK, start, summary+" (protected)", data)
		return true
	case st == http.StatusBadRequest && r.target.Scheme == "http" && !rpcBody && r.speaksTLS(ctx):
		r.fail(StepHTTP, start, r.plainToTLS(st), data)
		return false
	case st == http.StatusNotFound && !rpcBody, st == http.StatusGone:
		r.fail(StepHTTP, start, Result{Code: CodeHTTPStatus, HTTPStatus: st, Reason: ReasonNotFound,
			Message: fmt.Sprintf("HTTP %d: nothing at %s", st, first.URL),
			Hint:    "check the path of the URL: MCP endpoints are often at /mcp (streamable-http) or /sse (sse)"}, data)
		return false
	case refusesPOST(st, first.ContentType):
		r.fail(StepHTTP, start, Result{Code: CodeNotMCP, HTTPStatus: st, Reason: "protocol",
			Message: fmt.Sprintf("HTTP %d %s with an HTML page: a web server that does not take POST here, not an MCP endpoint", st, http.StatusText(st)),
			Hint:    "check the URL's path (MCP endpoints are often at /mcp, or /sse for the sse transport)"}, data)
		return false
	case st == http.StatusForbidden && !rpcBody:
		r.fail(StepHTTP, start, Result{Code: CodeHTTPStatus, HTTPStatus: st,
			Message: fmt.Sprintf("HTTP 403 Forbidden: %s", bodyGist(first)),
			Hint:    "the server refuses this client: check the headers it requires, IP allow-lists, or the token's permissions"}, data)
		return false
	case st >= 500 && !rpcBody:
		res := Result{Code: CodeHTTPStatus, HTTPStatus: st,
			Message: fmt.Sprintf("HTTP %d %s", st, http.StatusText(st)),
			Hint:    "the server failed to handle the request: check its logs"}
		if g := bodyGist(first); g != "" {
			res.Message += fmt.Sprintf(" (%s: %q)", mediaType(first.ContentType), g)
		}
		if st == http.StatusBadGateway || st == http.StatusServiceUnavailable || st == http.StatusGatewayTimeout {
			res.Hint = "a gateway or load balancer answered: the MCP server behind it is down or unreachable from it; check that service"
		}
		r.fail(StepHTTP, start, res, data)
		return false
	case st >= 200 && st < 300:
		r.add(StepHTTP, StatusOK, start, summary, data)
	default:
		// 400, 405, 406, 415 ... may be an MCP server objecting to one
		// request of the negotiation; the mcp step decides.
		r.add(StepHTTP, StatusWarn, start, summary, data)
	}
	return true
}

// refusesPOST: a plain web server's answer to a POST it does not take
// (405 or 501 with an HTML page), which says "not MCP", not "failing".
func refusesPOST(status int, contentType string) bool {
	return (status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented) && mediaType(contentType) == "text/html"
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt == "" {
		return "body"
	}
	return mt
}

// speaksTLS reports whether the target's port completes a TLS handshake,
// which explains a plain http:// request failing there.
func (r *runner) speaksTLS(ctx context.Context) bool {
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	d := &tls.Dialer{Config: &tls.Config{ServerName: r.host, InsecureSkipVerify: true}} //nolint:gosec // only asks whether the port speaks TLS; nothing is sent
	conn, err := d.DialContext(sctx, "tcp", r.hostPort())
	if err != nil {
		var cve *tls.CertificateVerificationError
		return errors.As(err, &cve)
	}
	conn.Close()
	return true
}

func (r *runner) plainToTLS(status int) Result {
	u := *r.target
	u.Scheme = "https"
	u.User = nil
	u.RawQuery = ""
	msg := "plain http:// was sent to a port that speaks TLS"
	if status != 0 {
		msg = fmt.Sprintf("HTTP %d: plain http:// was sent to a port that speaks TLS", status)
	}
	return Result{Code: CodeHTTPStatus, HTTPStatus: status, Reason: ReasonPlainHTTPToTLS,
		Message: msg, Hint: "use https:// — probe " + u.String()}
}

// mcpFailure classifies an MCP negotiation that failed after the HTTP
// exchange looked fine.
func (r *runner) mcpFailure(start time.Time, err error, ex []*exchange) {
	facts := map[string]any{"tried": triedMethods(ex), "error": clean(err.Error())}
	if res, ok := walk(err); ok && res.Code != CodeConnectionUnreachable || ok && lastFailed(ex) {
		if res.Code == CodeTimeout {
			res.Message = fmt.Sprintf("the MCP handshake did not complete within %s", r.opts.Timeout)
			res.Hint = "the server accepted the request but did not answer in time: check the server, or raise --timeout"
		}
		r.fail(StepMCP, start, res, facts)
		return
	}
	var last *exchange
	for i := len(ex) - 1; i >= 0; i-- {
		if ex[i].err == nil {
			last = ex[i]
			break
		}
	}
	switch {
	case last != nil && last.Status >= 200 && last.Status < 300 && !isRPCContent(last.ContentType):
		r.fail(StepMCP, start, Result{Code: CodeNotMCP,
			Message: fmt.Sprintf("the endpoint answered HTTP %d with %s, not JSON-RPC: %q", last.Status, mediaType(last.ContentType), bodyGist(last)),
			Hint:    "this URL is not an MCP endpoint: check the path (often /mcp) and --transport (streamable-http or sse)"}, facts)
	case last != nil && refusesPOST(last.Status, last.ContentType):
		r.fail(StepMCP, start, Result{Code: CodeNotMCP, HTTPStatus: last.Status, Reason: "protocol",
			Message: fmt.Sprintf("%s %s answered HTTP %d with an HTML page: a web server, not an MCP endpoint", last.Method, last.RPC, last.Status),
			Hint:    "check the URL's path (MCP endpoints are often at /mcp, or /sse for the sse transport)"}, facts)
	case last != nil && last.Status >= 400 && !isRPCContent(last.ContentType):
		r.fail(StepMCP, start, Result{Code: CodeHTTPStatus, HTTPStatus: last.Status,
			Message: fmt.Sprintf("%s %s answered HTTP %d: %s", last.Method, last.RPC, last.Status, bodyGist(last)),
			Hint:    "the server rejected the MCP handshake at the HTTP level: check the URL, --transport and --protocol"}, facts)
	default:
		r.fail(StepMCP, start, Result{Code: CodeNotMCP,
			Message: "the MCP handshake failed: " + clean(err.Error()),
			Hint:    "the endpoint does not answer as an MCP server: check the path, --transport and --protocol"}, facts)
	}
}

func lastFailed(ex []*exchange) bool {
	return len(ex) > 0 && ex[len(ex)-1].err != nil
}

// unknownSessionCheck sends a harmless request with a made-up session id:
// the spec wants 404 so that clients re-initialise; 400 leaves them stuck.
func (r *runner) unknownSessionCheck(ctx context.Context, version string) (string, bool) {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	body := []byte(`{"jsonrpc":"2.0","id":"mcpx-probe-session-check","method":"ping"}`)
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, r.target.String(), bytes.NewReader(body))
	if err != nil {
		return "not checked: " + clean(err.Error()), false
	}
	for k, v := range r.requestHeaders() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "mcpx-probe-unknown-"+hex.EncodeToString(raw[:]))
	req.Header.Set("Mcp-Protocol-Version", version)
	resp, err := r.client.Do(req)
	if err != nil {
		return "not checked: " + clean(err.Error()), false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch resp.StatusCode {
	case http.StatusNotFound:
		return "an unknown session id gets 404, as clients expect", false
	case http.StatusBadRequest:
		return "an unknown session id gets HTTP 400 instead of 404: clients will not re-initialise after the server forgets a session", true
	default:
		return fmt.Sprintf("an unknown session id gets HTTP %d (404 expected)", resp.StatusCode), resp.StatusCode < 400
	}
}
