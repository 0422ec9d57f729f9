package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/relay"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Exchange and Handler are the relay's: one request relayed to the
// upstream and the client side that takes what the upstream sends for it.
type (
	Exchange = relay.Exchange
	Handler  = relay.Handler
)

// Method-not-found: the answer to a request the client cannot take.
const codeMethodNotFound = mcp.METHOD_NOT_FOUND

// progressIDs and requestIDs number proxyd's progress tokens and request
// ids. String ids keep them apart from the library's integer ids on the
// same transport.
var (
	progressIDs atomic.Int64
	requestIDs  = &rawIDs
)

func nextRequestID() string { return "mcpx-" + strconv.FormatInt(requestIDs.Add(1), 10) }

// exchange is one Exchange in flight.
type exchange struct {
	ex      *Exchange
	ctx     context.Context // the call's
	token   string          // proxyd's progress token, "" without one
	id      string          // the current attempt's JSON-RPC id
	started time.Time
	// asked: methods of the upstream's requests routed to this call from
	// outside its stream (under routes.mu).
	asked map[string]bool

	// notifyMu orders the call's notifications with its end: one passed
	// on before the call returns is written before its result; after,
	// none is (ended).
	notifyMu sync.Mutex
	ended    bool
	// out holds the notifications of shared channels for the call's
	// client, made at the first (see notify).
	outOnce sync.Once
	out     *relay.Outbox
	// answering: the attempt's answer is in hand; a notification routed
	// to the call now is held to leave with it, in one write.
	answering bool
}

// notify passes a notification read from a channel the server's calls
// share (stdio, the standing stream) to the call's client, through the
// call's outbox: the reader does not wait for this call's client. False
// when the call has ended (or has no client side), for the caller to
// route it elsewhere.
func (x *exchange) notify(method string, params json.RawMessage) bool {
	if x.ex.Handler == nil {
		return false
	}
	x.outOnce.Do(func() {
		x.out = relay.NewOutbox(func(method string, params json.RawMessage) { x.pass(method, params, false) })
	})
	return x.out != nil && x.out.Put(method, params)
}

// pass is notify; with hold, for a notification read from the call's own
// stream, a client side that can hold it sends it with what follows (see
// relay.HeldNotifier). held: it did, for the reader to flush it before it
// waits for the upstream.
func (x *exchange) pass(method string, params json.RawMessage, hold bool) (delivered, held bool) {
	x.notifyMu.Lock()
	defer x.notifyMu.Unlock()
	if x.ended || x.ex.Handler == nil {
		return false, false
	}
	if hn, ok := x.ex.Handler.(relay.HeldNotifier); ok && (hold || x.answering) {
		hn.NotifyHeld(method, params)
		return true, true
	}
	x.ex.Handler.Notify(method, params)
	return true, false
}

// flush sends the notifications held for the call's client.
func (x *exchange) flush() {
	x.notifyMu.Lock()
	defer x.notifyMu.Unlock()
	if hn, ok := x.ex.Handler.(relay.HeldNotifier); ok && !x.ended {
		hn.Flush()
	}
}

// answerInHand marks the attempt's answer in hand (see answering), or,
// for an attempt that is to be repeated, no longer: what was held for it
// is flushed.
func (x *exchange) answerInHand(on bool) {
	x.notifyMu.Lock()
	x.answering = on
	x.notifyMu.Unlock()
	if !on {
		x.flush()
	}
}

// end stops notifications for the call, after any being passed on. It
// returns how many its client was too slow to be given (see
// relay.Outbox).
func (x *exchange) end() (dropped int) {
	x.outOnce.Do(func() {}) // no outbox from now on
	if x.out != nil {
		dropped = x.out.Close()
	}
	x.notifyMu.Lock()
	x.ended = true
	x.notifyMu.Unlock()
	return dropped
}

// routes finds the exchange a message from the upstream belongs to when it
// arrives outside the exchange's own response stream (stdio, the GET
// stream): progress by token, server requests by elimination.
type routes struct {
	mu       sync.Mutex
	progress map[string]*exchange
	inflight map[*exchange]struct{}
	// asks cancels the client's answer to an upstream request the upstream
	// cancelled (notifications/cancelled), by the request's id.
	asks map[string]context.CancelFunc
	// waiting counts the upstream's requests being answered.
	waiting int
}

// maxWaitingAsks bounds the upstream's requests answered at once on one
// connection.
const maxWaitingAsks = 64

// takeAsk claims a place for an upstream request; false when full.
func (r *routes) takeAsk() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting >= maxWaitingAsks {
		return false
	}
	r.waiting++
	return true
}

// overAsked is the answer to request id of the upstream past
// maxWaitingAsks: refused rather than left to pile up.
func overAsked(id json.RawMessage) []byte {
	return response(id, nil, &RPCError{Code: mcp.INTERNAL_ERROR, Message: "too many requests of the upstream wait for answers"})
}

func (r *routes) doneAsk() {
	r.mu.Lock()
	r.waiting--
	r.mu.Unlock()
}

func (r *routes) add(x *exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inflight == nil {
		r.inflight, r.progress, r.asks = map[*exchange]struct{}{}, map[string]*exchange{}, map[string]context.CancelFunc{}
	}
	r.inflight[x] = struct{}{}
	if x.token != "" {
		r.progress[x.token] = x
	}
}

func (r *routes) remove(x *exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, x)
	if x.token != "" {
		delete(r.progress, x.token)
	}
}

func (r *routes) byToken(token string) *exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress[token]
}

// only returns the one exchange in flight whose client passes ok, or nil
// when there is none or more than one (then nobody can tell which call a
// message belongs to).
func (r *routes) only(ok func(*exchange) bool) *exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found *exchange
	for x := range r.inflight {
		if !ok(x) {
			continue
		}
		if found != nil {
			return nil
		}
		found = x
	}
	return found
}

// pick finds the call a request of the upstream belongs to when it arrives
// outside any call's stream (stdio, the GET stream; the MCP library's
// servers send sampling and roots requests there): the only call in
// flight whose client can answer it; with several, the oldest not yet
// asked for this method (servers ask in the order calls came, in
// practice), else the oldest; with none, the only call in flight, whose
// client cannot answer. A call parked between a modern client's rounds
// whose client has not come back is left out while any other call's
// client is there: its upstream asked what that round needed before
// proxyd answered the round (gather) and waits for the answers, so a
// request now is another call's. The guess is made only among the calls
// of one client (a legacy session): a request put to another client
// would show it the first's prompt and hand the first the other's
// answer, so with calls of several clients able to answer, shared is
// true and no call is picked. A request on a call's own stream never
// needs a guess.
func (r *routes) pick(method string, accepts func(*exchange) bool) (picked *exchange, shared bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all, here []*exchange // calls in flight; those whose client is there
	for x := range r.inflight {
		all = append(all, x)
		if attended(x) {
			here = append(here, x)
		}
	}
	live := all
	if len(here) > 0 {
		live = here
	}
	var best *exchange
	owner, owners := "", 0
	for _, x := range live {
		if !accepts(x) {
			continue
		}
		// A call without an owner is a client of its own.
		if o := relay.OwnerOf(x.ex.Handler); owners == 0 || o == "" || o != owner {
			owner = o
			owners++
		}
		if best == nil || likelier(x, best, method) {
			best = x
		}
	}
	switch {
	case owners > 1:
		return nil, true
	case best == nil && len(live) == 1:
		return live[0], false
	case best == nil:
		return nil, false
	}
	if best.asked == nil {
		best.asked = map[string]bool{}
	}
	best.asked[method] = true
	return best, false
}

// likelier reports whether x is a better guess than y for a request of
// method: one not yet asked for it, then the older.
func likelier(x, y *exchange, method string) bool {
	if x.asked[method] != y.asked[method] {
		return !x.asked[method]
	}
	return x.started.Before(y.started)
}

// attended reports whether a call's client is there to answer now: a
// handler that can be left by its client says so (relay.Attender).
func attended(x *exchange) bool {
	if a, ok := x.ex.Handler.(relay.Attender); ok {
		return a.Attended()
	}
	return true
}

func (r *routes) addAsk(id string, cancel context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asks == nil {
		r.inflight, r.progress, r.asks = map[*exchange]struct{}{}, map[string]*exchange{}, map[string]context.CancelFunc{}
	}
	r.asks[id] = cancel
}

func (r *routes) endAsk(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.asks, id)
}

func (r *routes) cancelAsk(id string) {
	r.mu.Lock()
	cancel := r.asks[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Relay sends ex to the upstream and returns the upstream's result as it
// came. An upstream JSON-RPC error is an *RPCError. A lost session is
// re-established and the request repeated by the session rules (a
// tools/call only when the tool is read-only and unchanged).
func (c *Conn) Relay(ctx context.Context, ex *Exchange) (json.RawMessage, error) {
	if _, err := c.client(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil, &ErrNotReady{Server: c.name, State: stateClosing}
	}
	c.inflight.Add(1)
	c.mu.Unlock()
	defer c.inflight.Done()

	if ex.LogLevel != "" && !c.Modern() {
		c.WantLevel(ctx, ex.LogLevel)
	}
	x := &exchange{ex: ex, ctx: ctx, started: time.Now()}
	if ex.Progress {
		x.token = "mcpx-p-" + strconv.FormatInt(progressIDs.Add(1), 10)
	}
	c.routes.add(x)
	// Before the result goes back: a notification routed to this call from
	// another goroutine (the GET stream, stdio) is written first or not
	// at all. The call leaves the routes first, so that while a slow
	// client's outbox is written out the call is no longer one the
	// server's requests could be routed to.
	defer func() {
		c.routes.remove(x)
		if n := x.end(); n > 0 {
			c.dropped.Add(int64(n))
			c.opts.logger().Warn("dropped notifications for a client that did not read its stream: past the bound proxyd holds for one call, so that the server's other calls go on",
				"server", c.name, "method", ex.Method, "dropped", n, "bound_messages", relay.OutboxMessages, "bound_bytes", relay.OutboxBytes)
		}
	}()

	var rule retryRule
	var tool *Tool
	if ex.Method == string(mcp.MethodToolsCall) {
		before, known := c.Tool(ex.Name)
		tool, rule = &before, c.callRule(before, known)
	}
	var raw json.RawMessage
	err := c.withSession(ctx, rule, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w, hc := c.wire, c.hc
		c.mu.RUnlock()
		var err error
		raw, err = c.send(ctx, cl, w, hc, x, tool)
		return err
	})
	var sr *SessionReestablishedError
	if errors.As(err, &sr) && ex.Method == string(mcp.MethodToolsCall) {
		sr.Tool = ex.Name
	}
	if err != nil {
		err = limitCause(ctx, err)
	}
	return raw, err
}

// send makes one attempt of x.
func (c *Conn) send(ctx context.Context, cl *client.Client, w wire, hc *http.Client, x *exchange, tool *Tool) (json.RawMessage, error) {
	x.id = nextRequestID()
	params, meta := x.ex.Params, x.meta(w)
	var header http.Header
	if w.modern() && mcp.RequiresStandardHeaders(w.version) {
		header = http.Header{headerMethod: {x.ex.Method}}
		if v, ok := mcp.EncodeHeaderValue(x.ex.Name); ok && x.ex.Name != "" && namedMethod(x.ex.Method) {
			header[headerName] = []string{v}
		}
		if tool != nil && tool.ParamHeaders {
			for k, v := range mcp.GenerateParamHeaders(&tool.Tool, x.ex.Edit.Apply(params)) {
				header.Set(k, v)
			}
		}
	}
	if hc != nil && c.cfg.EffectiveTransport() == config.TransportStreamableHTTP {
		res, err := c.post(ctx, cl, w, hc, x, x.ex.Edit.PartsWith(params, x.ex.Index), meta, header)
		if x.token != "" || x.ex.LogLevel != "" {
			// Its notifications may have come on a standing stream: they
			// are taken in first, and leave with the answer.
			x.answerInHand(true)
			c.standing.settle(ctx)
			if err != nil {
				x.answerInHand(false) // the attempt may be repeated
			}
		}
		return res, err
	}
	if l := stdioOf(cl); l != nil {
		return c.sendStdio(ctx, cl, l, w, x, x.ex.Edit.PartsWith(params, x.ex.Index), meta)
	}
	if l := sseOf(cl); l != nil && hc != nil {
		return c.sendSSE(ctx, cl, l, hc, w, x, x.ex.Edit.PartsWith(params, x.ex.Index), meta, header)
	}
	return nil, fmt.Errorf("no way to send to a %s server", c.cfg.EffectiveTransport())
}

// stdioOf is the link to a stdio child the client speaks to, nil for
// another transport.
func stdioOf(cl *client.Client) *stdioLink {
	if t, ok := cl.GetTransport().(*childTransport); ok {
		return t.link
	}
	return nil
}

// namedMethod: the methods whose Mcp-Name header names their target.
func namedMethod(m string) bool {
	return m == string(mcp.MethodToolsCall) || m == string(mcp.MethodPromptsGet) || m == string(mcp.MethodResourcesRead)
}

// meta is the _meta object the attempt's params carry in the upstream's
// era (nil: none). It is added as the request is encoded, so that large
// params are copied once.
func (x *exchange) meta(w wire) json.RawMessage {
	var meta []byte
	add := func(key string, value []byte) {
		if len(meta) == 0 {
			meta = append(meta, '{')
		} else {
			meta = append(meta, ',')
		}
		meta = relay.AppendString(meta, key)
		meta = append(meta, ':')
		meta = append(meta, value...)
	}
	if w.modern() {
		add(mcp.MetaKeyProtocolVersion, w.versionJSON)
		caps := x.ex.ClientCaps
		if len(caps) == 0 {
			caps = w.caps
		}
		add(mcp.MetaKeyClientCapabilities, caps)
		add(mcp.MetaKeyClientInfo, w.info)
		if x.ex.LogLevel != "" {
			add(mcp.MetaKeyLogLevel, relay.AppendString(nil, x.ex.LogLevel))
		}
	}
	if x.token != "" {
		add("progressToken", relay.AppendString(nil, x.token))
	}
	if m := bytes.TrimSpace(x.ex.Meta); len(m) > 2 {
		if inner := bytes.TrimSpace(m[1 : len(m)-1]); len(inner) > 0 {
			if len(meta) == 0 {
				meta = append(meta, '{')
			} else {
				meta = append(meta, ',')
			}
			meta = append(meta, inner...)
		}
	}
	if len(meta) == 0 {
		return nil
	}
	return append(meta, '}')
}

// deliverHeld passes a notification read from x's own stream to the call
// it belongs to (see recipient), held by that call's client side until
// what follows is written or the reader flushes; it returns the exchange
// that holds it (nil when none does).
func (c *Conn) deliverHeld(x *exchange, method string, params json.RawMessage) *exchange {
	if x = c.recipient(x, method, params); x != nil {
		if _, held := x.pass(method, params, true); held {
			return x
		}
	}
	return nil
}

// recipient is the exchange a notification read during x goes to: x, the
// call a progress token names, or none (a cancellation of one of the
// upstream's requests is acted on here).
func (c *Conn) recipient(x *exchange, method string, params json.RawMessage) *exchange {
	switch method {
	case string(mcp.MethodNotificationCancelled):
		// The upstream gave up a request it sent the client.
		if id := cancelledID(params); id != "" {
			c.routes.cancelAsk(id)
		}
		return nil
	case string(mcp.MethodNotificationProgress):
		if t := progressToken(params); t != "" && t != x.token {
			// Another call's progress on this stream: route it by token.
			return c.routes.byToken(t)
		}
	}
	return x
}

// progressToken reads a progress notification's token as proxyd issued
// it (a string); "" for anything else. It is read on every notification of
// a streamed answer, so it slices rather than decodes.
func progressToken(params json.RawMessage) string {
	return relay.StringMember(params, "progressToken")
}

// cancelledID reads the request id of a notifications/cancelled as a key.
func cancelledID(params json.RawMessage) string {
	id, _ := relay.Member(params, "requestId")
	return relay.IDKey(id)
}

// answer puts a request of the upstream (sent during exchange x, or nil
// when no exchange could be told) to the client and returns the JSON-RPC
// response to send back.
func (c *Conn) answer(x *exchange, id json.RawMessage, method string, params json.RawMessage) []byte {
	if method == string(mcp.MethodPing) {
		return response(id, json.RawMessage("{}"), nil)
	}
	var h Handler
	ctx := c.ctx
	if x != nil {
		h, ctx = x.ex.Handler, x.ctx
	}
	if h == nil {
		if x == nil && method == string(mcp.MethodListRoots) {
			// Outside any call there is no client to ask: proxyd itself
			// has no roots.
			return response(id, json.RawMessage(`{"roots":[]}`), nil)
		}
		return response(id, nil, &RPCError{Code: codeMethodNotFound, Message: refusal(method, x == nil)})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := relay.IDKey(id)
	c.routes.addAsk(key, cancel)
	defer c.routes.endAsk(key)
	res, err := h.Ask(ctx, method, params)
	if err != nil {
		var rpc *RPCError
		if !errors.As(err, &rpc) {
			rpc = &RPCError{Code: mcp.INTERNAL_ERROR, Message: err.Error()}
		}
		return response(id, nil, rpc)
	}
	return response(id, res, nil)
}

func refusal(method string, outside bool) string {
	if outside {
		return fmt.Sprintf("%s outside a tool call: proxyd cannot tell which of its clients to ask", method)
	}
	return fmt.Sprintf("the client does not support %s (it did not declare the capability)", method)
}

// response encodes a JSON-RPC response.
func response(id, result json.RawMessage, rpcErr *RPCError) []byte {
	out := make([]byte, 0, 64+len(result))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	if rpcErr != nil {
		e := struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		}{rpcErr.Code, rpcErr.Message, rpcErr.Data}
		b, _ := json.Marshal(e)
		out = append(out, `,"error":`...)
		out = append(out, b...)
	} else {
		out = append(out, `,"result":`...)
		out = append(out, result...)
	}
	return append(out, '}')
}

// cancelParams are a notifications/cancelled's params for request id.
func cancelParams(id, reason string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"requestId": id, "reason": reason})
	return b
}

// errStreamEnded: the upstream ended a response stream before the response.
var errStreamEnded = errors.New("the upstream closed the response stream before the response")

// onServerRequest answers a request the upstream sent outside an exchange's
// own stream (stdio, the GET stream), routed by routes.pick.
// (The MCP library decoded it; a stdio child's come as they were, through
// stdioLink.)
func (c *Conn) onServerRequest(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	id, _ := json.Marshal(req.ID)
	params, _ := json.Marshal(req.Params)
	if req.Params == nil {
		params = nil
	}
	var resp transport.JSONRPCResponse
	if err := json.Unmarshal(c.serverRequest(id, req.Method, params), &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// serveRequest answers a request of the server and hands the answer to
// send, on a goroutine of its own (the reader that found it must not wait
// on a client, nor on a server that waits on the reader): one that came on
// call x's own stream is x's client's, one that came elsewhere (x nil) is
// routed by serverRequest. Past maxWaitingAsks it is refused at once
// rather than left to pile up.
func (c *Conn) serveRequest(m relay.Message, x *exchange, send func([]byte)) {
	if !c.routes.takeAsk() {
		go send(overAsked(m.ID))
		return
	}
	go func() {
		defer c.routes.doneAsk()
		if x != nil {
			send(c.answer(x, m.ID, m.Method, m.Params))
			return
		}
		send(c.serverRequest(m.ID, m.Method, m.Params))
	}()
}

// serverRequest answers a request of the upstream outside any call's own
// stream: the JSON-RPC response to send back.
func (c *Conn) serverRequest(id json.RawMessage, method string, params json.RawMessage) []byte {
	x, shared := c.routes.pick(method, func(x *exchange) bool { return x.ex.Handler != nil && x.ex.Handler.Accepts(method) })
	if shared {
		c.opts.logger().Warn("refused a request the upstream sent outside any call's stream: calls of several clients could answer it, and proxyd does not guess between clients",
			"server", c.name, "method", method)
		return response(id, nil, &RPCError{Code: codeMethodNotFound, Message: fmt.Sprintf(
			"%s outside a tool call's stream while calls of several clients are in flight: proxyd cannot tell which client it is for (send it on the call's own response stream)", method)})
	}
	return c.answer(x, id, method, params)
}
