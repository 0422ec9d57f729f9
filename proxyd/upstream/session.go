package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/api"
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
		return false, fmt.Sprintf("server %q is %s", c.name, c.state.Phrase())
	case c.cfg.EffectiveTransport() != config.TransportStreamableHTTP:
		return false, fmt.Sprintf("the %s transport has no protocol sessions", c.cfg.EffectiveTransport())
	case c.era == EraModern:
		return false, "the server speaks the modern (session-less) protocol era: there is no session to lose"
	case c.sid == "":
		return false, "the server issued no session id"
	}
	return true, ""
}

// attempt runs fn once on the live client and reports the client and the
// session id it ran on (the session layer holds its requests while a
// re-initialisation is in progress).
func (c *Conn) attempt(ctx context.Context, fn func(context.Context, *client.Client) error) (*client.Client, string, *attemptTrace, error) {
	cl, err := c.client()
	if err != nil {
		return nil, "", nil, err
	}
	sid := c.SessionID()
	ctx, tr := withTrace(ctx)
	return cl, sid, tr, fn(ctx, cl)
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
	cl, sid, tr, err := c.attempt(ctx, fn)
	lost, deviation := c.lostSession(err, tr)
	if !lost {
		c.checkClient(cl, err)
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
	cl, _, tr2, err := c.attempt(ctx, fn)
	if again, dev2 := c.lostSession(err, tr2); again {
		if info != nil {
			info.Deviation = info.Deviation || dev2
		}
		return fmt.Errorf("the session was lost again right after it was re-established: %w", err)
	}
	c.checkClient(cl, err)
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
	c.mu.RLock()
	conn := c.connNo
	c.mu.RUnlock()
	changed, err := c.reinitialize(stale, deviation)
	if err != nil {
		c.opts.logger().Warn("upstream session re-initialisation failed", "server", c.name,
			"old_session", prefix(stale), "err", err)
		// The client is left without a session: reconnect from scratch.
		c.losses.report(conn, fmt.Errorf("re-establishing the session: %w", err))
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
	c.setListsLocked(lists)
	c.mu.Unlock()
	n := c.reinits.Add(1)
	go c.reapplyLevel()
	go c.resubscribe()
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
