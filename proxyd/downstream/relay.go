package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/mediatype"
	"github.com/mcpx-dev/mcpx/internal/readall"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// Call is one client request the endpoint relays to an upstream.
type Call struct {
	Server string
	Method string
	// Name is the upstream's name of the tool or prompt, or the resource
	// URI (for the Mcp-Name header and the activity record).
	Name string
	// Params are the client's params with names mapped and _meta removed
	// once Edit, when set, is made (see relay.Exchange.Edit).
	Params json.RawMessage
	Edit   *relay.Edit
	// Index lists the members of Params as the client sent them (see
	// relay.Members), or is nil.
	Index *relay.Members
	// Meta are the client's own _meta members (era keys and progressToken
	// removed), a JSON object or nil.
	Meta json.RawMessage
	// ProgressToken is the client's, nil without one.
	ProgressToken json.RawMessage
	// LogLevel is the client's log level ("" when not set).
	LogLevel string
	Peer     relay.Peer
	CallMeta CallMeta
	// Then, when the backend sets it, runs once the client has its answer
	// (or has gone): what the client need not wait for. After an SSE
	// answer it runs on a goroutine of its own.
	Then func()
	// Unready: Name is under the prefix of Server, which was not ready
	// when the call came (see UnreadyOwner), and Exposed is the name the
	// client called: the backend refuses the call, never sends it.
	Unready bool
	Exposed string
	// Answer, when the endpoint sets it, lets the backend answer the
	// client before Relay returns (once, from another goroutine; then
	// runs after the answer is out); Relay then returns
	// relay.ErrAnswered. See relay.Request.Answer.
	Answer func(res json.RawMessage, err error, then func())
}

// Relayer is implemented by backends that relay requests to upstreams (the
// proxy core): the result in the client's era, or an error (a
// *relay.RPCError passes to the client as it is).
type Relayer interface {
	Relay(ctx context.Context, c *Call) (json.RawMessage, error)
}

// UnreadyOwner is implemented by backends that can name the server of a
// tool the endpoint does not serve because that server is not ready: a
// call of it is relayed all the same, marked Unready, for the backend to
// refuse with the server's state (a tool error naming the cause) rather
// than the library's "tool not found".
type UnreadyOwner interface {
	UnreadyOwner(exposed string) (server, tool string, ok bool)
}

// maxRelayBody bounds a request the relay reads; larger ones take the
// library's path.
const maxRelayBody = 4 << 20

// Prefix of the ids proxyd gives the requests it puts to clients.
const askPrefix = "mcpx-s-"

// clientMessage reads a client's JSON-RPC message; false when the relay
// leaves it to the library, which answers a malformed message, a batch
// or a version other than 2.0 with its own error.
func clientMessage(body []byte) (relay.Message, bool) {
	msg, err := relay.ParseMessage(body)
	return msg, err == nil && msg.JSONRPC == "2.0"
}

// relayed are the methods the relay answers itself.
var relayed = map[string]bool{
	string(mcp.MethodToolsCall):          true,
	string(mcp.MethodPromptsGet):         true,
	string(mcp.MethodResourcesRead):      true,
	string(mcp.MethodCompletionComplete): true,
}

// relay answers, without the MCP library, the requests proxyd relays to
// one upstream, the clients' responses to requests proxyd put to them and
// their cancellations. Anything else, or anything off (an unknown name, a
// header that does not match the body), returns false with the body
// restored, for the library to answer; lib, when not nil, is the writer
// the library answers through (see idRestorer), to finish once it has.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, client string) (handled bool, lib *idRestorer) {
	if r.Method != http.MethodPost || r.URL.Path != "/mcp" {
		return false, nil
	}
	if mediatype.Of(r.Header.Get("Content-Type")) != "application/json" {
		return false, nil
	}
	body, err := readBody(r)
	if err != nil || len(body) > maxRelayBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return false, nil
	}
	msg, ok := clientMessage(body)
	if rl, relays := s.backend.(Relayer); ok && relays && s.relayMessage(w, r, client, rl, msg) {
		return true, nil
	}
	if ok && oneShot[msg.Method] && len(msg.ID) > 0 && !echoedExactly(msg.ID) {
		body, lib = restoreID(w, body, msg.ID)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return false, lib
}

// readBody reads up to maxRelayBody+1 bytes of r's body, in one buffer
// of the declared length when there is one.
func readBody(r *http.Request) ([]byte, error) {
	var buf []byte // unknown length: read in chunks
	if n := r.ContentLength; n >= 0 && n <= maxRelayBody {
		buf = make([]byte, 0, n+1)
	}
	return readall.Into(buf, io.LimitReader(r.Body, maxRelayBody+1))
}

// relayMessage relays the client's message msg (see relay); false: the
// library answers it.
func (s *Server) relayMessage(w http.ResponseWriter, r *http.Request, client string, rl Relayer, msg relay.Message) bool {
	version := r.Header.Get("Mcp-Protocol-Version")
	if version != "" && !mcp.IsValidProtocolVersion(version) {
		return false // the library answers an unsupported version
	}
	if msg.Method != "" && len(msg.ID) > 0 && !scalarID(msg.ID) {
		// The library would answer it (ids of any type, null as none);
		// its answer could not be matched, and a relayed call would run.
		writeInvalidRequest(w, nil, http.StatusBadRequest, "invalid request: the id must be a string (of valid UTF-8) or a number")
		return true
	}
	var pv paramValues
	unambiguous := msg.Members.Fields(msg.Params, paramKeys[:], pv[:])
	meta := pv[pMeta]
	metaVersion := relay.StringMember(meta, mcp.MetaKeyProtocolVersion)
	modern := mcp.IsModernProtocol(version) || mcp.IsModernProtocol(metaVersion)
	sid := r.Header.Get("Mcp-Session-Id")
	var sess *session
	if !modern {
		if sid == "" && msg.Method != string(mcp.MethodInitialize) {
			// The spec's answer (the library's would be 404, which tells
			// a client its session ended when it never sent one).
			writeInvalidRequest(w, msg.ID, http.StatusBadRequest, "bad request: no Mcp-Session-Id header: send the one initialize returned, or initialize first")
			return true
		}
		if sess = s.sessions.get(sid); sess == nil {
			return false
		}
	}
	switch {
	case msg.Method == "" && len(msg.ID) > 0:
		return !modern && s.takeAnswer(w, sess, msg)
	case msg.Method == string(mcp.MethodNotificationCancelled) && len(msg.ID) == 0:
		// A modern client cancels by closing its request's stream; the
		// notification names an id, and modern requests of every client
		// share one space of ids: taken as one, it would let a client
		// end another's request. It is accepted and left.
		if !modern && !sess.cancel(relay.IDKey(relayMember(msg.Params, "requestId"))) {
			return false
		}
		w.WriteHeader(http.StatusAccepted)
		return true
	case len(msg.ID) == 0 || bytes.Equal(msg.ID, []byte("null")):
		return false
	case !unambiguous:
		// A member the relay decides on (a name, uri, ref, the
		// arguments, _meta) appears twice or under another case: the
		// library decodes the request once, as the upstream's decoder
		// would, and acts on what it read.
		return false
	case modern && !validModern(r, msg, &pv, metaVersion, version):
		return false
	case msg.Method == string(mcp.MethodResourcesSubscribe) || msg.Method == string(mcp.MethodResourcesUnsubscribe):
		return !modern && s.subscribe(w, r, sess, msg)
	case msg.Method == string(mcp.MethodSubscriptionsListen):
		return modern && s.listen(w, r, msg)
	case !relayed[msg.Method]:
		return false
	}
	call, ok := s.route(msg, &pv)
	if !ok {
		if call, ok = s.unready(msg, &pv); !ok {
			return false
		}
	}
	if msg.Method == string(mcp.MethodToolsCall) && modern && call.tool != nil && call.tool.paramHeaders {
		if mcp.ValidateParamHeadersLookup(headerLookup(r.Header), call.tool.def, msg.Params) != nil {
			return false
		}
	}
	s.relaying.Add(1)
	defer s.relaying.Add(-1)
	c := call.Call
	index := msg.Members
	c.Index = &index
	c.ProgressToken, c.Meta = splitMeta(meta)
	peer := &httpPeer{w: w, s: s, server: c.Server, modern: modern, level: -1, chunked: r.ProtoAtLeast(1, 1)}
	if c.ProgressToken != nil && !scalarID(c.ProgressToken) {
		peer.answer(msg.ID, msg.Method, nil, &relay.RPCError{Code: relay.CodeInvalidParams, Message: "invalid params: _meta.progressToken must be a string (of valid UTF-8) or a number"})
		return true
	}
	c.CallMeta = CallMeta{Client: "mcp"}
	if modern {
		peer.caps = relay.ParseCaps(relayMember(meta, mcp.MetaKeyClientCapabilities))
		c.LogLevel = relay.StringMember(meta, mcp.MetaKeyLogLevel)
	} else {
		peer.sess = sess
		peer.caps = sess.capabilities()
		c.LogLevel = sess.logLevel()
		c.CallMeta.Client = "session:" + prefix(sid)
	}
	if c.LogLevel != "" {
		peer.level = relay.LogLevelRank(c.LogLevel)
	}
	if client != "" {
		c.CallMeta.Client = client
	}
	c.Peer = peer
	defer func() {
		// The work left for after the answer (an upstream stream's end)
		// goes first, to free its connection, and never holds the
		// handler.
		work := peer.later.Close()
		if !peer.streamed() {
			if len(work) > 0 {
				go runEach(work)
			}
			if c.Then != nil {
				c.Then()
			}
			return
		}
		// An SSE answer's body ends when the handler returns (the
		// chunked encoding's last chunk): the client reading to that end
		// must not wait for the bookkeeping either, which shares the
		// work's goroutine.
		if c.Then != nil {
			work = append(work, c.Then)
		}
		if len(work) > 0 {
			go runEach(work)
		}
	}()
	// A modern client cancels by closing its request, which ends
	// r.Context(); a legacy session's notifications/cancelled needs a
	// context of its own to end.
	ctx := relay.WithLater(r.Context(), &peer.later)
	if sess != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer sess.track(relay.IDKey(msg.ID), cancel)()
	}
	if modern && r.ProtoMajor == 1 {
		// A modern client's call may be answered (input_required) while
		// its upstream call goes on in this handler. The connection
		// closes after that answer: HTTP/1.1 would hold the client's next
		// request (its retry with the input) until the handler returns,
		// and an SSE answer's stream would end only then.
		id, method := msg.ID, msg.Method
		c.Answer = func(res json.RawMessage, err error, then func()) {
			peer.closeAfter()
			peer.answer(id, method, res, err)
			if then != nil {
				then()
			}
		}
	}
	res, err := rl.Relay(ctx, &c)
	if errors.Is(err, relay.ErrAnswered) {
		return true
	}
	if ctx.Err() != nil && r.Context().Err() != nil {
		peer.close() // the client went away: nobody to answer
		return true
	}
	peer.answer(msg.ID, msg.Method, res, err)
	return true
}

// answer writes the client's answer to its request (its id and method):
// res, or err as a JSON-RPC error.
func (p *httpPeer) answer(id json.RawMessage, method string, res json.RawMessage, err error) {
	if err != nil {
		rpc, ok := relay.IsRPCError(err)
		if !ok {
			rpc = &relay.RPCError{Code: relay.CodeInternal, Message: err.Error()}
		}
		p.finish(id, nil, rpc)
		return
	}
	if p.modern && method == string(mcp.MethodResourcesRead) {
		res = withCacheHints(res)
	}
	p.finish(id, res, nil)
}

// validModern applies the modern era's checks of a request (protocol
// version in header and body, client capabilities, standard headers); a
// request failing them goes to the library, which answers with the
// precise error.
func validModern(r *http.Request, msg relay.Message, pv *paramValues, metaVersion, version string) bool {
	if r.Header.Get("Last-Event-ID") != "" || metaVersion == "" || metaVersion != version {
		return false
	}
	caps := relayMember(pv[pMeta], mcp.MetaKeyClientCapabilities)
	if len(caps) == 0 || caps[0] != '{' {
		return false
	}
	return standardHeadersValid(r.Header.Get, version, msg.Method, msg.Params, pv)
}

// standardHeadersValid is the library's check of the standard headers
// (mcp.ValidateStandardHeaders) without its decoding of params for the
// common request: a name (or uri) that is a plain string equal to the
// decoded Mcp-Name passes at once. Anything else gets the library's check,
// on the naming member alone so the arguments and _meta are not decoded.
// pv is params read by relay.Fields.
func standardHeadersValid(get func(string) string, version, method string, params []byte, pv *paramValues) bool {
	m := mcp.MCPMethod(method)
	key, v := "", []byte(nil)
	switch m {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		key, v = "name", pv[pName]
	case mcp.MethodResourcesRead:
		key, v = "uri", pv[pURI]
	}
	checked := params
	if v != nil {
		if h := get(mcp.HeaderName); h != "" && get(mcp.HeaderMethod) == method {
			name, isString := relay.String(v)
			decoded, decodes := mcp.DecodeHeaderValue(h)
			if isString && decodes && decoded == name {
				return true
			}
		}
		checked = make([]byte, 0, len(key)+len(v)+5)
		checked = append(checked, '{', '"')
		checked = append(checked, key...)
		checked = append(checked, '"', ':')
		checked = append(checked, v...)
		checked = append(checked, '}')
	}
	return mcp.ValidateStandardHeaders(get, version, m, checked) == nil
}

func headerLookup(h http.Header) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v := h.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
}

func relayMember(obj []byte, key string) []byte {
	v, _ := relay.Member(obj, key)
	return v
}

// scalarID: a JSON value (as the parser checked it) is a string or a
// number, as JSON-RPC ids and MCP progress tokens are. A string must be
// valid UTF-8 (JSON text is): echoed back as it came, one that is not
// would make the answer invalid JSON to a strict reader, and encoding/json
// readers would match it as another string (invalid bytes read as
// U+FFFD).
func scalarID(v []byte) bool {
	return len(v) > 0 && (v[0] == '"' && utf8.Valid(v) || v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// writeInvalidRequest answers a request proxyd cannot take with JSON-RPC
// -32600 and HTTP status; id is the request's, or nil where it cannot
// be echoed (null).
func writeInvalidRequest(w http.ResponseWriter, id json.RawMessage, status int, message string) {
	if len(id) == 0 || !scalarID(id) {
		id = json.RawMessage("null")
	}
	body := appendResponse(nil, id, nil, &relay.RPCError{Code: relay.CodeInvalidRequest, Message: message}, relay.AsIs, nil)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// splitMeta takes the client's progress token out of its _meta and keeps
// the members that are the client's own (not the era's).
func splitMeta(meta []byte) (token json.RawMessage, own json.RawMessage) {
	if len(meta) < 2 {
		return nil, nil
	}
	if t, ok := relay.Member(meta, "progressToken"); ok && string(t) != "null" {
		token = append(json.RawMessage(nil), t...)
	}
	var kept []byte
	relay.EachMember(meta, func(key, member []byte) {
		if string(key) == "progressToken" || bytes.HasPrefix(key, []byte("io.modelcontextprotocol/")) {
			return
		}
		if kept == nil {
			kept = append(kept, '{')
		} else {
			kept = append(kept, ',')
		}
		kept = append(kept, member...)
	})
	if kept != nil {
		own = append(kept, '}')
	}
	return token, own
}

// takeAnswer routes a client's response to the request proxyd put to it.
func (s *Server) takeAnswer(w http.ResponseWriter, sess *session, msg relay.Message) bool {
	var id string
	if json.Unmarshal(msg.ID, &id) != nil || !strings.HasPrefix(id, askPrefix) {
		return false
	}
	a := answer{result: msg.Result}
	if msg.Error != nil {
		a = answer{err: msg.Error}
	} else if msg.Result == nil {
		a = answer{result: json.RawMessage("{}")}
	}
	s.asks.deliver(id, sess.id, a)
	// A late or unknown answer is accepted and dropped, as the spec asks
	// of a response nobody waits for.
	w.WriteHeader(http.StatusAccepted)
	return true
}

// paramKeys are the members of a request's params the relay reads, in
// the order of paramValues.
var paramKeys = [...]string{"name", "arguments", "_meta", "uri", "ref"}

// paramValues are the values of paramKeys in one request (nil: absent).
type paramValues [len(paramKeys)][]byte

const (
	pName = iota
	pArguments
	pMeta
	pURI
	pRef
)

// refKeys are the members of a completion's ref the relay reads.
var refKeys = [...]string{"type", "name", "uri"}

// routed is a client request matched to its upstream.
type routed struct {
	Call
	tool *route // tools/call: the tool's route
}

// route finds the upstream a relayed request goes to and maps its names;
// the params it gives leave out the client's _meta.
func (s *Server) route(msg relay.Message, pv *paramValues) (routed, bool) {
	t := s.table.Load()
	if t == nil {
		return routed{}, false
	}
	params := msg.Params
	// Without a _meta of the client's, there is nothing to leave out: no
	// pass over params (which can be megabytes) looks for one.
	var drop *relay.Edit
	if pv[pMeta] != nil {
		drop = dropMeta
	}
	switch msg.Method {
	case string(mcp.MethodToolsCall):
		name, _ := relay.String(pv[pName])
		rt, ok := t.tools[name]
		if !ok {
			return routed{}, false
		}
		if args := pv[pArguments]; args != nil && args[0] != '{' && string(args) != "null" {
			return routed{}, false // the library answers malformed arguments
		}
		return routed{Call: Call{Server: rt.server, Method: msg.Method, Name: rt.tool, Params: params, Edit: rename("name", name, rt.tool, drop)}, tool: &rt}, true
	case string(mcp.MethodPromptsGet):
		name, _ := relay.String(pv[pName])
		pr, ok := t.prompts[name]
		if !ok {
			return routed{}, false
		}
		return routed{Call: Call{Server: pr.server, Method: msg.Method, Name: pr.name, Params: params, Edit: rename("name", name, pr.name, drop)}}, true
	case string(mcp.MethodResourcesRead):
		uri, _ := relay.String(pv[pURI])
		srv, ok := t.resourceServer(uri)
		if !ok {
			return routed{}, false
		}
		return routed{Call: Call{Server: srv, Method: msg.Method, Name: uri, Params: params, Edit: drop}}, true
	case string(mcp.MethodCompletionComplete):
		ref := pv[pRef]
		var rv [len(refKeys)][]byte
		if !relay.Fields(ref, refKeys[:], rv[:]) {
			return routed{}, false // the library decides (see relayMessage)
		}
		typ, _ := relay.String(rv[0])
		switch typ {
		case "ref/prompt":
			name, _ := relay.String(rv[1])
			pr, ok := t.prompts[name]
			if !ok {
				return routed{}, false
			}
			edit := drop
			if name != pr.name {
				edit = &relay.Edit{Key: "ref", Value: withName(ref, pr.name), Drop: metaKey(drop)}
			}
			return routed{Call: Call{Server: pr.server, Method: msg.Method, Name: pr.name, Params: params, Edit: edit}}, true
		case "ref/resource":
			uri, _ := relay.String(rv[2])
			srv, ok := t.templateServer(uri)
			if !ok {
				if srv, ok = t.resourceServer(uri); !ok {
					return routed{}, false
				}
			}
			return routed{Call: Call{Server: srv, Method: msg.Method, Name: uri, Params: params, Edit: drop}}, true
		}
	}
	return routed{}, false
}

// unready routes a tools/call of a name no ready server exposes to the
// server that would expose it, when the backend names one that is not
// ready (see UnreadyOwner).
func (s *Server) unready(msg relay.Message, pv *paramValues) (routed, bool) {
	u, ok := s.backend.(UnreadyOwner)
	if !ok || msg.Method != string(mcp.MethodToolsCall) {
		return routed{}, false
	}
	name, isString := relay.String(pv[pName])
	if !isString {
		return routed{}, false
	}
	srv, tool, ok := u.UnreadyOwner(name)
	if !ok {
		return routed{}, false
	}
	var drop *relay.Edit
	if pv[pMeta] != nil {
		drop = dropMeta
	}
	return routed{Call: Call{Server: srv, Method: msg.Method, Name: tool, Params: msg.Params, Edit: rename("name", name, tool, drop), Unready: true, Exposed: name}}, true
}

// dropMeta leaves out the client's _meta (the upstream's era has its own).
var dropMeta = &relay.Edit{Drop: "_meta"}

// rename is the edit that sets member key from exposed to the upstream's
// name and makes drop (dropMeta, or nil when there is no _meta).
func rename(key, exposed, upstream string, drop *relay.Edit) *relay.Edit {
	if exposed == upstream {
		return drop
	}
	return &relay.Edit{Key: key, Value: relay.AppendString(nil, upstream), Drop: metaKey(drop)}
}

// metaKey is the member drop leaves out ("" for none).
func metaKey(drop *relay.Edit) string {
	if drop == nil {
		return ""
	}
	return drop.Drop
}

// withName is ref with its name set to the upstream's.
func withName(ref []byte, upstream string) []byte {
	return relay.WithMember(ref, "name", relay.AppendString(nil, upstream))
}

// withCacheHints gives a modern resources/read result proxyd's cache
// hints: private (what proxyd serves depends on its user's credentials),
// and no fresher than CacheTTLMillis.
func withCacheHints(res json.RawMessage) json.RawMessage {
	res = relay.WithMember(res, "cacheScope", []byte(`"private"`))
	ttl := CacheTTLMillis
	if v, ok := relay.Member(res, "ttlMs"); ok {
		if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 && n < ttl {
			ttl = n
		}
	}
	return relay.WithMember(res, "ttlMs", strconv.AppendInt(nil, int64(ttl), 10))
}

// runEach runs fns in order.
func runEach(fns []func()) {
	for _, f := range fns {
		f()
	}
}
