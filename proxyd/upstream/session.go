package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Session recovery (legacy protocol era, Streamable HTTP).
//
// An upstream that restarts or expires a session answers 404 to the
// session id proxyd holds (some answer 400, see deviationMessage). The
// first caller to see that starts one re-initialisation keyed by the stale
// session id; everyone who saw the same id shares it. While it runs, the
// session layer of the HTTP chain holds every other request at
// Conn.barrier, so nothing goes out on the session being established
// before its initialized notification. It does not wait for
// calls still in flight on the stale session: their 404s arrive while the
// new session is set up, and they join the flight or find it done. The
// handshake goes through the transport directly, so mcp-go's client fields
// (protocol version, capabilities), which calls read, are never written
// under a call.

// sessionHeader is the legacy-era session header.
const sessionHeader = "Mcp-Session-Id"

// deviationMessage is how the TypeScript SDK's servers (server-everything
// among them) answer an unknown or deleted session, with HTTP 400 instead
// of the 404 the MCP spec asks for.
const deviationMessage = "Bad Request: No valid session ID provided"

// DeviationNote is the log line and drill note for that deviation.
const DeviationNote = "server answered 400 for a forgotten session; the MCP spec asks for 404"

// deviationPeek bounds how much of a 400 body is read to recognise it.
const deviationPeek = 4 << 10

// ErrSessionReestablished is the sentinel behind SessionReestablishedError:
// the session was re-established but the call was not repeated because
// repeating it could run it twice or run a changed tool.
var ErrSessionReestablished = errors.New("session re-established; call not repeated")

// SessionReestablishedError is returned for a tools/call whose session was
// lost and re-established when repeating the call is not safe.
type SessionReestablishedError struct {
	Server string
	Tool   string
	// Reason says why the call was not repeated.
	Reason string
}

func (e *SessionReestablishedError) Error() string {
	return fmt.Sprintf("server %q: session re-established; call not repeated: %s", e.Server, e.Reason)
}

// Is makes errors.Is(err, ErrSessionReestablished) hold.
func (e *SessionReestablishedError) Is(target error) bool { return target == ErrSessionReestablished }

// SessionReestablished marks the error for classifiers that cannot import
// this package (class session_terminated, fault domain upstream).
func (e *SessionReestablishedError) SessionReestablished() bool { return true }

// CallInfo tells the caller what session recovery did for one call. Its
// fields are set by the call path and are safe to read once the call has
// returned.
type CallInfo struct {
	// Reinit: the call's session was lost and re-established.
	Reinit bool
	// Retried: the request was sent a second time after the re-init.
	Retried bool
	// NotRepeated: the call was refused a repeat (SessionReestablishedError).
	NotRepeated bool
	// Deviation: the server signalled the lost session with the 400 deviation.
	Deviation bool
}

type callInfoKey struct{}

// WithCallInfo returns a context that collects a CallInfo for the call made
// with it.
func WithCallInfo(ctx context.Context) (context.Context, *CallInfo) {
	info := &CallInfo{}
	return context.WithValue(ctx, callInfoKey{}, info), info
}

// CallInfoFrom returns the context's CallInfo, or nil.
func CallInfoFrom(ctx context.Context) *CallInfo {
	info, _ := ctx.Value(callInfoKey{}).(*CallInfo)
	return info
}

// attemptTrace is what the session layer of the HTTP chain saw for one
// attempt of a call (the last HTTP request it made).
type attemptTrace struct {
	mu        sync.Mutex
	sent      bool
	session   string // the session id the request carried
	status    int
	deviation bool
}

func (t *attemptTrace) snapshot() (sent bool, session string, status int, deviation bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent, t.session, t.status, t.deviation
}

type traceKey struct{}

func withTrace(ctx context.Context) (context.Context, *attemptTrace) {
	t := &attemptTrace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// staleKey marks the re-initialisation's requests with the stale session
// id, which the session layer strips: mcp-go keeps an id the server
// answered 400 for, and such a server refuses an initialize that carries it.
type staleKey struct{}

// forgedSession makes the session layer present an id the server does not
// know in place of a live one (the session drill against servers that do
// not accept DELETE).
type forgedSession struct {
	real, fake string
}

// sessionTransport is the innermost layer of an HTTP upstream's chain:
// it traces each call attempt (sent, session id, status, the 400
// deviation), strips a stale id from a re-initialisation, and presents a
// forged id during the session drill.
type sessionTransport struct {
	next http.RoundTripper
	conn *Conn
}

func (t *sessionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stale, _ := ctx.Value(staleKey{}).(string)
	if stale == "" {
		// The barrier is enforced here, where the session id is fixed (a
		// large request takes a while to encode, so a check before the
		// library would leave a gap). The re-initialisation's own requests
		// carry staleKey.
		if err := t.conn.waitBarrier(ctx); err != nil {
			return nil, err
		}
	}
	id := req.Header.Get(sessionHeader)
	if stale != "" && id == stale {
		req = req.Clone(ctx)
		req.Header.Del(sessionHeader)
		id = ""
	} else if f := t.conn.forged.Load(); f != nil && id != "" && id == f.real {
		req = req.Clone(ctx)
		req.Header.Set(sessionHeader, f.fake)
	}
	tr, _ := ctx.Value(traceKey{}).(*attemptTrace)
	if tr == nil {
		return t.next.RoundTrip(req)
	}
	tr.mu.Lock()
	tr.sent, tr.session, tr.status, tr.deviation = true, id, 0, false
	tr.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	deviation := false
	switch {
	case resp.Body == nil || id == "":
	case resp.StatusCode == http.StatusBadRequest:
		deviation = peekDeviation(resp)
	case resp.StatusCode == http.StatusNotFound:
		// mcp-go closes a 404 unread, which costs the connection; read
		// the (short) body first so a burst of lost-session replies does
		// not turn into a burst of new connections for the retries.
		_, _ = peekBody(resp)
	}
	tr.mu.Lock()
	tr.status, tr.deviation = resp.StatusCode, deviation
	tr.mu.Unlock()
	return resp, nil
}

// peekDeviation reports whether a 400 body is the "No valid session ID"
// JSON-RPC error, leaving the body unchanged for the reader.
func peekDeviation(resp *http.Response) bool {
	head, ok := peekBody(resp)
	if !ok {
		return false
	}
	var msg struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(bytes.TrimSpace(head), &msg) != nil || msg.Error == nil {
		return false
	}
	return strings.TrimSpace(msg.Error.Message) == deviationMessage
}

// peekBody reads up to deviationPeek bytes of the body and puts them back
// in front of the rest; ok means that was the whole body.
func peekBody(resp *http.Response) (head []byte, ok bool) {
	head, err := callerr.PeekBody(resp, deviationPeek)
	return head, err == nil && len(head) <= deviationPeek
}

// sessionful reports whether the connection has sessions that can be lost:
// legacy era over Streamable HTTP. In the modern era a 404 is
// method-not-found, never a lost session.
func (c *Conn) sessionful() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.era == EraLegacy && c.cfg.EffectiveTransport() == config.TransportStreamableHTTP && c.sid != ""
}

// SessionID is the full id of the current upstream session ("" without one).
func (c *Conn) SessionID() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sid
}

// Sessionful reports whether the server holds a session proxyd could lose
// (legacy era over Streamable HTTP with a session id), and if not, why.
func (c *Conn) Sessionful() (bool, string) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.state != api.StateReady || c.cl == nil:
		return false, fmt.Sprintf("server %q is %s", c.name, c.state)
	case c.cfg.EffectiveTransport() != config.TransportStreamableHTTP:
		return false, fmt.Sprintf("the %s transport has no protocol sessions", c.cfg.EffectiveTransport())
	case c.era == EraModern:
		return false, "the server speaks the modern (session-less) protocol era: there is no session to lose"
	case c.sid == "":
		return false, "the server issued no session id"
	}
	return true, ""
}

// attempt runs fn once on the live client and reports the session id it
// ran on (the session layer holds its requests while a re-initialisation
// is in progress).
func (c *Conn) attempt(ctx context.Context, fn func(context.Context, *client.Client) error) (string, *attemptTrace, error) {
	cl, err := c.client()
	if err != nil {
		return "", nil, err
	}
	sid := c.SessionID()
	ctx, tr := withTrace(ctx)
	return sid, tr, fn(ctx, cl)
}

// waitBarrier waits while a session re-initialisation is in progress.
func (c *Conn) waitBarrier(ctx context.Context) error {
	b := c.barrier.Load()
	if b == nil {
		return nil
	}
	select {
	case <-*b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lostSession tells a forgotten session from other failures of an attempt.
func (c *Conn) lostSession(err error, tr *attemptTrace) (lost, deviation bool) {
	if err == nil || tr == nil || !c.sessionful() {
		return false, false
	}
	sent, session, status, dev := tr.snapshot()
	switch {
	case dev:
		return true, true
	case !errors.Is(err, transport.ErrSessionTerminated):
		return false, false
	case !sent:
		// mcp-go refused to send: it saw the session end (a 404 to
		// another request or to the GET stream) and waits for a new one.
		return true, false
	default:
		return session != "" && status == http.StatusNotFound, false
	}
}

// retryRule decides, after a re-init, whether an attempt may be made
// again. sent says whether the first attempt reached the server. It
// returns "" to go ahead or the reason not to.
type retryRule func(sent bool) string

// withSession runs fn, re-establishing a lost session once and retrying
// as rule allows. A second loss, or a failed re-init, is an ordinary
// failure.
func (c *Conn) withSession(ctx context.Context, rule retryRule, fn func(context.Context, *client.Client) error) error {
	sid, tr, err := c.attempt(ctx, fn)
	lost, deviation := c.lostSession(err, tr)
	if !lost {
		c.checkBroken(err)
		return err
	}
	if sent, carried, _, _ := tr.snapshot(); sent && carried != "" {
		// Key the flight by the session the request actually carried: it
		// may be newer than the one read before sending.
		sid = carried
	}
	info := CallInfoFrom(ctx)
	if info != nil {
		info.Reinit = true
		info.Deviation = info.Deviation || deviation
	}
	if rerr := c.reestablish(ctx, sid, deviation); rerr != nil {
		return fmt.Errorf("%w (re-establishing the upstream session failed: %w)", err, rerr)
	}
	sent, _, _, _ := tr.snapshot()
	if rule != nil {
		if reason := rule(sent); reason != "" {
			if info != nil {
				info.NotRepeated = true
			}
			return &SessionReestablishedError{Server: c.name, Reason: reason}
		}
	}
	if sent && info != nil {
		info.Retried = true
	}
	_, tr2, err := c.attempt(ctx, fn)
	if again, dev2 := c.lostSession(err, tr2); again {
		if info != nil {
			info.Deviation = info.Deviation || dev2
		}
		return fmt.Errorf("the session was lost again right after it was re-established: %w", err)
	}
	c.checkBroken(err)
	return err
}

// reestablish joins or starts the one re-initialisation for stale.
func (c *Conn) reestablish(ctx context.Context, stale string, deviation bool) error {
	ch := c.flights.DoChan(stale, func() (any, error) {
		return nil, c.reinit(stale, deviation)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reinit initialises the same mcp-go client again, lists what the server
// offers, refreshes the tool baseline and announces a changed tool list. It
// runs on the connection's context, not a caller's, so one caller giving
// up does not fail the others.
func (c *Conn) reinit(stale string, deviation bool) error {
	changed, err := c.reinitialize(stale, deviation)
	if err != nil {
		c.opts.logger().Warn("upstream session re-initialisation failed", "server", c.name,
			"old_session", prefix(stale), "err", err)
		// The client is left without a session: reconnect from scratch.
		select {
		case c.broken <- fmt.Errorf("re-establishing the session: %w", err):
		default:
		}
		return err
	}
	if changed {
		c.opts.changed(c.name)
	}
	return nil
}

func (c *Conn) reinitialize(stale string, deviation bool) (toolsChanged bool, err error) {
	c.mu.RLock()
	cur, cl, oldTools, version := c.sid, c.cl, c.tools, c.version
	c.mu.RUnlock()
	if cur != stale {
		// Re-established (or reconnected) since this caller's attempt.
		return false, nil
	}
	if cl == nil {
		return false, &ErrNotReady{Server: c.name, State: c.Status().State, LastError: c.lastError()}
	}
	// Only the flight that re-initialises holds the barrier: one for an
	// older session returns above without touching it.
	done := make(chan struct{})
	c.barrier.Store(&done)
	defer func() {
		c.barrier.CompareAndSwap(&done, nil)
		close(done)
	}()
	if deviation {
		c.opts.logger().Info(DeviationNote, "server", c.name, "old_session", prefix(stale))
	}
	ctx, cancel := context.WithTimeout(context.WithValue(c.ctx, staleKey{}, stale), connectTimeout)
	defer cancel()
	res, err := handshake(ctx, cl, version, c.clientInfo())
	if err != nil {
		if c.superseded(cl) {
			return false, nil
		}
		return false, fmt.Errorf("initialize: %w", err)
	}
	w := wire{version: res.ProtocolVersion} // legacy era: no _meta
	lists, err := c.fetchLists(ctx, cl, w, res.Capabilities)
	if err != nil {
		if c.superseded(cl) {
			return false, nil
		}
		return false, err
	}
	newID := cl.GetSessionId()
	c.mu.Lock()
	if c.cl != cl || c.sid != stale {
		// A reconnect replaced the client meanwhile: nothing to publish.
		c.mu.Unlock()
		return false, nil
	}
	c.forged.Store(nil)
	c.sid = newID
	c.version = res.ProtocolVersion
	c.wire = w
	c.serverInfo = res.ServerInfo
	c.caps = res.Capabilities
	c.tools, c.prompts, c.resources, c.templates = lists.tools, lists.prompts, lists.resources, lists.templates
	c.mu.Unlock()
	n := c.reinits.Add(1)
	toolsChanged = !sameTools(oldTools, lists.tools)
	c.opts.logger().Info("upstream session re-established", "server", c.name,
		"old_session", prefix(stale), "new_session", prefix(newID), "reinits", n, "tools_changed", toolsChanged)
	return toolsChanged, nil
}

// superseded reports whether a reconnect has replaced cl: a failure on it
// is no reason to tear down the new connection.
func (c *Conn) superseded(cl *client.Client) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cl != cl
}

// handshake runs the legacy initialize/initialized exchange on cl's
// transport, asking for the version the connection already speaks. Going
// around mcp-go's Client.Initialize keeps the client's fields untouched
// while other goroutines send on it.
func handshake(ctx context.Context, cl *client.Client, version string, info mcp.Implementation) (*mcp.InitializeResult, error) {
	params, err := json.Marshal(mcp.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      info,
		Capabilities:    cl.GetClientCapabilities(),
	})
	if err != nil {
		return nil, fmt.Errorf("encoding initialize: %w", err)
	}
	raw, err := rawRequest(ctx, cl, wire{version: version}, string(mcp.MethodInitialize), "", nil, params)
	if err != nil {
		return nil, err
	}
	tr := cl.GetTransport()
	var res mcp.InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the initialize result: %w", err)
	}
	if !mcp.IsValidProtocolVersion(res.ProtocolVersion) || mcp.IsModernProtocol(res.ProtocolVersion) {
		return nil, fmt.Errorf("server answered protocol version %q to a re-initialisation in %s", res.ProtocolVersion, version)
	}
	if res.ProtocolVersion != version {
		if hc, ok := tr.(transport.HTTPConnection); ok {
			hc.SetProtocolVersion(res.ProtocolVersion)
		}
	}
	err = tr.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationInitialized)},
	})
	if err != nil {
		return nil, fmt.Errorf("sending the initialized notification: %w", err)
	}
	return &res, nil
}

// sameTools compares two tool lists by name and definition hash.
func sameTools(a, b []Tool) bool {
	if len(a) != len(b) {
		return false
	}
	hashes := make(map[string]string, len(a))
	for _, t := range a {
		hashes[t.Name] = t.Hash
	}
	for _, t := range b {
		if h, ok := hashes[t.Name]; !ok || h != t.Hash {
			return false
		}
	}
	return true
}

// callRule is the retry rule of tools/call: a request the server never
// received goes out once; one it received is repeated only for a read-only
// tool whose definition is unchanged after the re-init.
func (c *Conn) callRule(before Tool, known bool) retryRule {
	return func(sent bool) string {
		after, ok := c.Tool(before.Name)
		switch {
		case !known:
			return "the tool was unknown when the call was made"
		case !ok:
			return "the tool is gone after the re-initialisation"
		case after.Hash != before.Hash:
			return "the tool's definition changed after the re-initialisation"
		case sent && !before.ReadOnly():
			return "the tool is not read-only, so the call may not be repeated"
		}
		return ""
	}
}

// Ping sends ping (retried once after a re-established session).
func (c *Conn) Ping(ctx context.Context) error {
	return c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		//lint:ignore SA1019 ping is the legacy era's liveness check; on a modern connection it sends nothing
		return cl.Ping(ctx)
	})
}

// ListTools lists the server's tools now (retried once after a
// re-established session) and makes the result the tool baseline.
func (c *Conn) ListTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	err := c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		var err error
		tools, err = listToolsRaw(ctx, cl, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	tools = c.usable(tools)
	c.mu.Lock()
	changed := !sameTools(c.tools, tools)
	c.tools = tools
	c.mu.Unlock()
	if changed {
		c.opts.changed(c.name)
	}
	return tools, nil
}

// SessionEnd says how EndSession ended the session.
const (
	EndedByDelete  = "delete"
	EndedByUnknown = "unknown_session_id"
)

// EndSession makes the upstream session unusable, as a server restart
// would, for the session drill: an HTTP DELETE of the session when the
// server accepts it, otherwise proxyd presents a session id the server does
// not know until the session is re-established. It reports which.
func (c *Conn) EndSession(ctx context.Context) (string, error) {
	if ok, why := c.Sessionful(); !ok {
		return "", errors.New(why)
	}
	if err := c.waitBarrier(ctx); err != nil {
		return "", err
	}
	c.mu.RLock()
	sid, hc, version := c.sid, c.hc, c.version
	c.mu.RUnlock()
	if hc == nil {
		return "", errors.New("no HTTP client for this server")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.cfg.URL, nil)
	if err != nil {
		return "", fmt.Errorf("building DELETE: %w", err)
	}
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(sessionHeader, sid)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("DELETE of the session: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		c.opts.logger().Info("upstream session ended by DELETE", "server", c.name, "session", prefix(sid))
		return EndedByDelete, nil
	case resp.StatusCode == http.StatusNotFound:
		// The server no longer knew the session: it is as good as ended.
		c.opts.logger().Info("upstream answered DELETE with 404: the session was already gone", "server", c.name, "session", prefix(sid))
		return EndedByDelete, nil
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	c.forged.Store(&forgedSession{real: sid, fake: "mcpx-unknown-" + hex.EncodeToString(b[:])})
	c.opts.logger().Info("upstream refused DELETE; presenting an unknown session id", "server", c.name,
		"session", prefix(sid), "status", resp.StatusCode)
	return EndedByUnknown, nil
}
