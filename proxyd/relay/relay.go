// Package relay carries one client request through proxyd to one upstream
// and back, across protocol eras: the upstream's notifications to the
// client that made the request, the upstream's requests for input to that
// client (as server requests to a legacy client, as multi-round-trip
// results to a modern one), and the client's answers back. It knows
// neither HTTP nor the MCP library: the upstream connection and the
// client's side are interfaces (see docs/relaying.md).
package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
)

// Exchange is one request relayed to an upstream on a client's behalf:
// its params pass as the client sent them, and what the upstream sends
// back for it (notifications, requests of its own) goes to Handler.
type Exchange struct {
	Method string
	// Name is what the Mcp-Name header carries: the tool or prompt name or
	// the resource URI ("" for methods without one).
	Name string
	// Params is the request's params as a JSON object without _meta (nil:
	// none), once Edit is made; the upstream connection adds _meta for
	// its era.
	Params json.RawMessage
	// Edit, when set, is the change of Params still to make (the client's
	// name of the target mapped to the upstream's, its _meta left out):
	// the upstream connection makes it as it frames the request. Members
	// the relay reads (requestState, inputResponses) are not changed by it.
	Edit *Edit
	// Index, when set, lists the members of Params (see Members): the
	// relay and the edit find them without a pass over Params each.
	Index *Members
	// Result, set by the upstream connection, lists the members of the
	// result it returned, found as it parsed the answer.
	Result *Members
	// Meta holds the client's own _meta members to pass on, as a JSON
	// object (nil: none). The era's keys and progressToken are not in it.
	Meta json.RawMessage
	// Progress: the client asked for progress; proxyd issues a token of its
	// own upstream and Handler gets the notifications with that token.
	Progress bool
	// ClientCaps are the client's capabilities (JSON), told to a modern
	// upstream; nil means proxyd's own.
	ClientCaps json.RawMessage
	// LogLevel is the client's log level, told to a modern upstream.
	LogLevel string
	// Handler receives what the upstream sends for this request; nil drops
	// notifications and refuses the upstream's requests.
	Handler Handler
}

// Handler is the client side of one exchange, as the upstream connection
// sees it.
type Handler interface {
	// Notify passes a notification of the upstream for this request. A
	// progress notification still carries proxyd's token.
	Notify(method string, params json.RawMessage)
	// Accepts reports whether the client can answer a request of method
	// (it declared the capability).
	Accepts(method string) bool
	// Ask puts the upstream's request to the client and returns the
	// client's result, or an *RPCError to answer with.
	Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// HeldNotifier is implemented by handlers and peers that can take a
// notification without sending it at once. The caller has more of the
// upstream's answer in hand: what it passes on next (another notification,
// a request, the result) goes out with it in one write, or the caller
// calls Flush before it waits for the upstream again.
type HeldNotifier interface {
	NotifyHeld(method string, params json.RawMessage)
	Flush()
}

// Attender is implemented by handlers whose client may be away for a
// while (a call parked between a modern client's rounds): the upstream
// connection prefers an attended call when it must guess which call a
// request belongs to.
type Attender interface {
	Attended() bool
}

// LogLevels are the levels of logging/setLevel and notifications/message
// (RFC 5424's severities), least severe first.
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogLevelRank is level's place in LogLevels; -1 for a level that is
// none of them.
func LogLevelRank(level string) int {
	for i, l := range LogLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// LogPasses reports whether a log message of level passes a filter whose
// least severe level has rank min (-1: every message passes); a level
// that is none of LogLevels passes.
func LogPasses(level string, min int) bool {
	r := LogLevelRank(level)
	return r < 0 || r >= min
}

// Owner is implemented by handlers and peers that name the client behind
// a call: a legacy session's calls share its owner, and "" is a client
// of the call's own (a modern client, the command line). A request the
// upstream sends outside any call's stream goes only to a call whose
// client is the one that can be meant (see upstream's routes.pick).
type Owner interface {
	Owner() string
}

// OwnerOf is the owner of a handler or peer ("" when it names none).
func OwnerOf(v any) string {
	if o, ok := v.(Owner); ok {
		return o.Owner()
	}
	return ""
}

// RPCError is a JSON-RPC error, code kept (the MCP library turns
// non-standard codes into plain text).
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage
	// ByProxy: proxyd's own answer to what the client sent (a retry it
	// cannot match, a capability the client lacks), not the upstream's.
	ByProxy bool
}

func (e *RPCError) Error() string {
	if e.ByProxy {
		return fmt.Sprintf("proxyd answered JSON-RPC error %d: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("upstream answered JSON-RPC error %d: %s", e.Code, e.Message)
}

// JSON-RPC error codes used here.
const (
	CodeInvalidRequest = -32600
	CodeInvalidParams  = -32602
	CodeMethodNotFound = -32601
	CodeInternal       = -32603
	// CodeMissingCapability: the request needs a client capability the
	// client did not declare (modern era).
	CodeMissingCapability = -32021
)

// Methods of the upstream's requests for input.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
	MethodProgress    = "notifications/progress"
	MethodMessage     = "notifications/message"
	MethodCancelled   = "notifications/cancelled"
	// MethodElicitationComplete announces the end of a URL-mode
	// elicitation; the legacy era only (the modern era has neither the
	// notification nor elicitation ids).
	MethodElicitationComplete = "notifications/elicitation/complete"
)

// Upstream is the connection a request is relayed to.
type Upstream interface {
	Relay(ctx context.Context, ex *Exchange) (json.RawMessage, error)
	// Modern reports whether the upstream speaks the modern era (answers
	// with input_required results rather than requests of its own).
	Modern() bool
}

// Peer is the client side of one relayed request.
type Peer interface {
	// Modern: the client speaks the modern era; it takes input_required
	// results, not requests.
	Modern() bool
	// Caps are the client's declared capabilities.
	Caps() Caps
	// Notify sends the client a notification (a progress notification
	// already carries the client's own token).
	Notify(method string, params json.RawMessage)
	// Ask sends the client a request and waits for its result (legacy
	// clients); an *RPCError is the client's error answer.
	Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// Caps are what a client declared it can answer.
type Caps struct {
	Sampling   bool
	ElicitForm bool
	ElicitURL  bool
	Roots      bool
	// Raw is the declaration as the client sent it (nil: none).
	Raw json.RawMessage
}

// ParseCaps reads a client capabilities object. An elicitation capability
// without modes means form mode (the 2025-06-18 form of the declaration).
func ParseCaps(raw json.RawMessage) Caps {
	if last := lastCaps.Load(); last != nil && last.raw == string(raw) {
		c := last.caps
		c.Raw = raw
		return c
	}
	c := parseCaps(raw)
	if c.Raw != nil && len(raw) <= lastCapsMax {
		kept := c
		kept.Raw = nil // the entry keeps no caller's buffer
		lastCaps.Store(&parsedCaps{raw: string(raw), caps: kept})
	}
	return c
}

// lastCaps is the declaration last read: a modern client sends the same
// one with every call, and decoding it each time was a measurable share
// of the call's path to its upstream. One entry, of at most lastCapsMax
// bytes, kept only when it decoded: clients that differ, and what does
// not decode, are read again.
var lastCaps atomic.Pointer[parsedCaps]

const lastCapsMax = 1024

type parsedCaps struct {
	raw  string
	caps Caps // without Raw
}

// parseCaps decodes a declaration (see ParseCaps).
func parseCaps(raw json.RawMessage) Caps {
	var c struct {
		Sampling    json.RawMessage `json:"sampling"`
		Roots       json.RawMessage `json:"roots"`
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return Caps{}
	}
	present := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	caps := Caps{Sampling: present(c.Sampling), Roots: present(c.Roots), Raw: raw}
	if c.Elicitation != nil {
		caps.ElicitForm = present(c.Elicitation.Form) || !present(c.Elicitation.URL)
		caps.ElicitURL = present(c.Elicitation.URL)
	}
	return caps
}

// Accepts reports whether a client with these capabilities can answer a
// request of method with params.
func (c Caps) Accepts(method string, params json.RawMessage) bool {
	switch method {
	case MethodSampling:
		return c.Sampling
	case MethodRoots:
		return c.Roots
	case MethodElicitation:
		if elicitationMode(params) == "url" {
			return c.ElicitURL
		}
		return c.ElicitForm
	}
	return false
}

// acceptsAny reports whether the client can answer some request of method.
func (c Caps) acceptsAny(method string) bool {
	if method == MethodElicitation {
		return c.ElicitForm || c.ElicitURL
	}
	return c.Accepts(method, nil)
}

func elicitationMode(params json.RawMessage) string {
	var p struct {
		Mode string `json:"mode"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Mode
}

// Refusal is the answer to a request of the upstream the client did not
// declare the capability for.
func Refusal(method string) *RPCError {
	return &RPCError{Code: CodeMethodNotFound, Message: fmt.Sprintf("the client does not support %s (it did not declare the capability)", method), ByProxy: true}
}
