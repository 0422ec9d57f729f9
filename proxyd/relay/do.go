package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// Result types of the modern era (SEP-2322).
const (
	resultComplete      = "complete"
	resultInputRequired = "input_required"
)

// maxInputRounds bounds how often proxyd answers an upstream's
// input_required for a legacy client before giving up (as the MCP library
// does for its own clients).
const maxInputRounds = 10

// Request is one client request to relay.
type Request struct {
	// Exchange is what goes upstream; its Params are the client's as sent
	// (in the modern era with inputResponses and requestState), its
	// Handler and Progress are set by the relay.
	Exchange Exchange
	// ProgressToken is the client's progress token (raw JSON), nil without.
	ProgressToken json.RawMessage
	// Stats, when set, collects what happened for the activity record.
	Stats *Stats
	// Answer, when set, lets the relay answer the client before Do
	// returns. A modern client's request to a legacy upstream runs on
	// Do's caller's goroutine; when the upstream asks for input, the
	// client's round ends with an input_required result (or the error
	// ending the call), passed to Answer once, from another goroutine,
	// while the upstream call goes on. Do then returns ErrAnswered when
	// that call ends: its result waits for the client's retry. Without
	// Answer such a request's requests for input are refused.
	Answer func(res json.RawMessage, err error)
	// Result is set by Do with the result it returns: the list of its
	// members the upstream connection found (see Members), or nil.
	Result *Members
}

// ErrAnswered: Do passed the client its answer through Request.Answer.
var ErrAnswered = errors.New("the client's request was answered while its upstream call went on")

// Stats is what a relayed request saw: progress notifications and the
// upstream's requests for input with the client's answers.
type Stats struct {
	mu       sync.Mutex
	progress int
	inputs   []Input
}

// Input is one request of the upstream for input, and the answer's action:
// accept, decline or cancel (elicitation), accept (sampling, roots), error
// (the client answered with an error), refused (the client lacks the
// capability), asked (passed to a modern client, answered in its retry).
type Input struct {
	Method string `json:"method"`
	Action string `json:"action"`
}

// Progress is the number of progress notifications relayed.
func (s *Stats) Progress() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}

// Inputs are the requests for input seen, in order.
func (s *Stats) Inputs() []Input {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Input(nil), s.inputs...)
}

func (s *Stats) addProgress() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.progress++
	s.mu.Unlock()
}

func (s *Stats) addInput(method, action string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.inputs = append(s.inputs, Input{Method: method, Action: action})
	s.mu.Unlock()
}

// action names the answer to a request for input.
func action(method string, res json.RawMessage, err error) string {
	if err != nil {
		return "error"
	}
	if method == MethodElicitation {
		if a := StringMember(res, "action"); a != "" {
			return a
		}
	}
	return "accept"
}

// Relayer relays requests; it keeps the calls parked between the rounds
// of a modern client's multi-round-trip exchange with a legacy upstream.
type Relayer struct {
	parked *parkTable
}

// New returns a Relayer.
func New() *Relayer { return &Relayer{parked: newParkTable()} }

// Close ends every call waiting for its client's retry, and lets no
// call wait from now on.
func (r *Relayer) Close() { r.parked.closeAll() }

// Do relays req to up for peer and returns the result for the client, in
// the client's era.
func (r *Relayer) Do(ctx context.Context, up Upstream, req *Request, peer Peer) (json.RawMessage, error) {
	ex := req.Exchange
	res, err := r.do(ctx, up, req, &ex, peer)
	if err == nil {
		req.Result = ex.Result
	}
	return res, err
}

func (r *Relayer) do(ctx context.Context, up Upstream, req *Request, ex *Exchange, peer Peer) (json.RawMessage, error) {
	ex.Progress = req.ProgressToken != nil
	state, answers := retryMembers(ex.Params, ex.Index)
	if state := stringOf(state); isParkToken(state) {
		if res, found, err := r.resume(ctx, state, answers, req, peer); found {
			return res, err
		}
		if !up.Modern() {
			return nil, &RPCError{Code: CodeInvalidParams, Message: "requestState is unknown or has expired (proxyd keeps a waiting call 5 minutes); call the tool again", ByProxy: true}
		}
	}
	recordAnswers(answers, req.Stats)
	if up.Modern() {
		ex.ClientCaps = peer.Caps().Raw
		if peer.Modern() {
			ex.Handler = &handler{peer: peer, token: req.ProgressToken, stats: req.Stats}
			res, err := up.Relay(ctx, ex)
			if err == nil {
				recordRequests(res, ex.Result, req.Stats, "asked")
			}
			return res, err
		}
		return r.fulfil(ctx, up, ex, req, peer)
	}
	if peer.Modern() {
		return r.park(ctx, up, ex, req, peer)
	}
	ex.Handler = &handler{peer: peer, token: req.ProgressToken, stats: req.Stats}
	res, err := up.Relay(ctx, ex)
	if err != nil {
		return nil, err
	}
	return shaped(peer, res, ex.Result, Legacy), nil
}

// fulfil answers a modern upstream's input_required results for a legacy
// client: each input request goes to the client as a request, and the
// upstream request is retried with the answers and the upstream's state.
func (r *Relayer) fulfil(ctx context.Context, up Upstream, ex *Exchange, req *Request, peer Peer) (json.RawMessage, error) {
	h := &handler{peer: peer, token: req.ProgressToken, stats: req.Stats}
	ex.Handler = h
	params := ex.Params
	var signins urlSignins
	for round := 0; ; round++ {
		ex.Params = params
		res, err := up.Relay(ctx, ex)
		if err != nil {
			return nil, err
		}
		signins.completed(h.peer, res, ex.Result)
		if resultType(res, ex.Result) != resultInputRequired {
			return shaped(peer, res, ex.Result, Legacy), nil
		}
		if round >= maxInputRounds {
			return nil, fmt.Errorf("the upstream still asked for input after %d rounds", maxInputRounds)
		}
		var ir struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  *string                    `json:"requestState"`
		}
		if err := json.Unmarshal(res, &ir); err != nil {
			return nil, fmt.Errorf("decoding the upstream's input_required result: %w", err)
		}
		answers := make(map[string]json.RawMessage, len(ir.InputRequests))
		for key, raw := range ir.InputRequests {
			var in struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, fmt.Errorf("decoding the upstream's input request %q: %w", key, err)
			}
			if !peer.Caps().Accepts(in.Method, in.Params) {
				req.Stats.addInput(in.Method, "refused")
				refused(peer, in.Method)
				return nil, &InputError{Method: in.Method}
			}
			in.Params = signins.identify(in.Method, in.Params)
			a, err := h.Ask(ctx, in.Method, in.Params)
			if err != nil {
				return nil, fmt.Errorf("the client's answer to %s: %w", in.Method, err)
			}
			signins.answered(in.Method, in.Params, a)
			answers[key] = a
		}
		b, err := json.Marshal(answers)
		if err != nil {
			return nil, err
		}
		params = WithMember(params, "inputResponses", b)
		if ir.RequestState != nil {
			s, _ := json.Marshal(*ir.RequestState)
			params = WithMember(params, "requestState", s)
		} else {
			params = WithoutMember(params, "requestState")
		}
	}
}

// elicitationIDs numbers the ids proxyd gives modern upstreams' URL
// elicitations for legacy clients.
var elicitationIDs atomic.Int64

// urlSignins bridges a modern upstream's URL-mode elicitations to a legacy
// client, which needs what the modern era dropped: an elicitationId on the
// request (proxyd adds one when the upstream gave none) and, once the
// out-of-band step is done, notifications/elicitation/complete. A modern
// upstream says it is done by taking the client's answer and not asking
// for the same URL again in its next result.
type urlSignins struct {
	accepted map[string]string // URL -> elicitationId, accepted last round
}

// identify gives a URL elicitation an id when it has none.
func (u *urlSignins) identify(method string, params json.RawMessage) json.RawMessage {
	if method != MethodElicitation || elicitationMode(params) != "url" || StringMember(params, "elicitationId") != "" {
		return params
	}
	id, _ := json.Marshal("mcpx-e-" + strconv.FormatInt(elicitationIDs.Add(1), 10))
	return WithMember(params, "elicitationId", id)
}

// answered notes a URL elicitation the client accepted.
func (u *urlSignins) answered(method string, params, answer json.RawMessage) {
	if method != MethodElicitation || elicitationMode(params) != "url" || StringMember(answer, "action") != "accept" {
		return
	}
	if u.accepted == nil {
		u.accepted = map[string]string{}
	}
	u.accepted[StringMember(params, "url")] = StringMember(params, "elicitationId")
}

// completed announces to the client the URL elicitations accepted last
// round that the upstream's next result res does not ask for again.
func (u *urlSignins) completed(peer Peer, res json.RawMessage, ms *Members) {
	if len(u.accepted) == 0 {
		return
	}
	if resultType(res, ms) == resultInputRequired {
		if reqs, ok := ms.Member(res, "inputRequests"); ok {
			var again map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(reqs, &again)
			for _, in := range again {
				if in.Method == MethodElicitation {
					delete(u.accepted, StringMember(in.Params, "url"))
				}
			}
		}
	}
	for _, id := range u.accepted {
		b, _ := json.Marshal(map[string]string{"elicitationId": id})
		peer.Notify(MethodElicitationComplete, b)
	}
	u.accepted = nil
}

// InputError: a modern upstream asked the client for input of a kind the
// client did not declare (it was told the client's capabilities).
type InputError struct{ Method string }

func (e *InputError) Error() string {
	return fmt.Sprintf("the upstream asked for %s, which the client did not declare; the call cannot continue", e.Method)
}

// handler is the client side of an exchange for a client that takes
// requests (a legacy client, or proxyd on a modern client's behalf).
type handler struct {
	peer  Peer
	token json.RawMessage
	stats *Stats
}

func (h *handler) Notify(method string, params json.RawMessage) { h.notify(method, params, false) }

// NotifyHeld is Notify for a notification that may wait for what follows
// (see HeldNotifier).
func (h *handler) NotifyHeld(method string, params json.RawMessage) { h.notify(method, params, true) }

// Flush sends the notifications held for the client.
func (h *handler) Flush() {
	if hn, ok := h.peer.(HeldNotifier); ok {
		hn.Flush()
	}
}

func (h *handler) notify(method string, params json.RawMessage, held bool) {
	switch method {
	case MethodProgress:
		if h.token == nil {
			return
		}
		params = WithMember(params, "progressToken", h.token)
		h.stats.addProgress()
	case MethodElicitationComplete:
		if h.peer.Modern() {
			return // not a notification of the modern era: its retry is the news
		}
	}
	if hn, ok := h.peer.(HeldNotifier); ok && held {
		hn.NotifyHeld(method, params)
		return
	}
	h.peer.Notify(method, params)
}

func (h *handler) Accepts(method string) bool { return h.peer.Caps().acceptsAny(method) }

func (h *handler) Owner() string { return OwnerOf(h.peer) }

func (h *handler) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if !h.peer.Caps().Accepts(method, params) {
		h.stats.addInput(method, "refused")
		refused(h.peer, method)
		return nil, Refusal(method)
	}
	if w := InputWatcherFrom(ctx); w != nil {
		w.InputAsked()
		defer func() { w.InputAnswered(errors.Is(ctx.Err(), context.DeadlineExceeded)) }()
	}
	res, err := h.peer.Ask(ctx, method, params)
	h.stats.addInput(method, action(method, res, err))
	return res, err
}

// Refuser is implemented by peers that want to hear of the upstream's
// requests refused for them (to say so to a person).
type Refuser interface {
	Refused(method string)
}

// InputWatcher hears of the requests for input a call's client is asked
// (the call's callerr.Recorder): a deadline that passes while a person
// answers one is not the upstream's fault.
type InputWatcher interface {
	InputAsked()
	// InputAnswered: the answer is in, or the call's deadline passed
	// first (timedOut).
	InputAnswered(timedOut bool)
}

type inputWatcherKey struct{}

// WithInputWatcher returns a context whose calls tell w of their
// requests for input.
func WithInputWatcher(ctx context.Context, w InputWatcher) context.Context {
	return context.WithValue(ctx, inputWatcherKey{}, w)
}

// InputWatcherFrom is the context's InputWatcher, or nil.
func InputWatcherFrom(ctx context.Context) InputWatcher {
	w, _ := ctx.Value(inputWatcherKey{}).(InputWatcher)
	return w
}

// refused tells peer, if it wants to hear, that method was refused for
// it: a legacy upstream's request or a modern upstream's input request.
func refused(peer Peer, method string) {
	if r, ok := peer.(Refuser); ok {
		r.Refused(method)
	}
}

// Shape is the form of a result a client's era takes.
type Shape int

const (
	// AsIs: the upstream's result as it came (a modern upstream's for a
	// modern client).
	AsIs Shape = iota
	// Legacy: without the modern era's resultType.
	Legacy
	// Modern: with resultType ("complete" when the upstream gave none).
	Modern
	// modernAdded: Modern for a result known to have no resultType.
	modernAdded
)

// refined is s for res, when ms lists res: AsIs where s would change
// nothing, and for one without resultType a Modern that does not look for
// it again (each look is a pass over a result that can be megabytes).
func (s Shape) refined(res json.RawMessage, ms *Members) Shape {
	k, _, listed := ms.find(res, "resultType")
	switch {
	case !listed:
		return s
	case s == Legacy && k < 0, s == Modern && k >= 0:
		return AsIs
	case s == Modern:
		return modernAdded
	}
	return s
}

// Shaper is implemented by a peer that puts results in shape as it frames
// them for its client: Do tells it the shape rather than handing it an
// edited copy, so a large result is copied once, into the frame. The
// shape holds for the result Do returns, and for any result of the same
// request (shapes are idempotent).
type Shaper interface {
	// Shape sets the shape; ms lists the result's members (nil when
	// unknown) for Shape.Append.
	Shape(s Shape, ms *Members)
}

// shaped is res in shape s for peer: as it is when peer shapes results
// itself, else an edited copy where s changes it.
func shaped(peer Peer, res json.RawMessage, ms *Members, s Shape) json.RawMessage {
	s = s.refined(res, ms)
	if sh, ok := peer.(Shaper); ok {
		sh.Shape(s, ms)
		return res
	}
	return s.Apply(res, ms)
}

// Apply returns res in shape s: res itself when it is in shape already;
// ms, when it lists res, saves a pass over res to find resultType.
func (s Shape) Apply(res json.RawMessage, ms *Members) json.RawMessage {
	switch s {
	case Legacy:
		if k, _, listed := ms.find(res, "resultType"); listed {
			if k < 0 {
				return res
			}
			return appendWithoutMember(make([]byte, 0, len(res)), res, "resultType", ms)
		}
		return LegacyResult(res)
	case Modern:
		return ModernResult(res)
	case modernAdded:
		parts, _ := addedFirst(res, "resultType", []byte(`"complete"`))
		return concat(parts[:]...)
	}
	return res
}

// Append appends res in shape s to dst; ms, when it lists res, saves a
// pass over res to find the members s changes.
func (s Shape) Append(dst []byte, res json.RawMessage, ms *Members) []byte {
	switch s {
	case Legacy:
		return appendWithoutMember(dst, res, "resultType", ms)
	case Modern, modernAdded:
		var parts [5][]byte
		var ok bool
		if s == modernAdded {
			parts, ok = addedFirst(res, "resultType", []byte(`"complete"`))
		} else {
			parts, ok = withResultType(res)
		}
		if ok {
			for _, p := range parts {
				dst = append(dst, p...)
			}
			return dst
		}
	}
	return append(dst, res...)
}

// withResultType is res with resultType "complete" added, as parts to
// join; ok is false when res has a resultType (or is not an object).
func withResultType(res json.RawMessage) (parts [5][]byte, ok bool) {
	if _, found := Member(res, "resultType"); found {
		return parts, false
	}
	return addedFirst(res, "resultType", []byte(`"complete"`))
}

// LegacyResult is a result as a legacy client takes it: without the modern
// era's resultType.
func LegacyResult(res json.RawMessage) json.RawMessage {
	// Only the result's own members are read: a search of the whole
	// result for the key's text costs a pass over a large one.
	return WithoutMember(res, "resultType")
}

// ModernResult is a result as a modern client takes it: with resultType.
func ModernResult(res json.RawMessage) json.RawMessage {
	parts, ok := withResultType(res)
	if !ok {
		return res
	}
	return concat(parts[:]...)
}

// recordRequests notes the input requests of an input_required result.
func recordRequests(res json.RawMessage, ms *Members, stats *Stats, act string) {
	if stats == nil || resultType(res, ms) != resultInputRequired {
		return
	}
	var ir struct {
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	if json.Unmarshal(res, &ir) != nil {
		return
	}
	for _, in := range ir.InputRequests {
		stats.addInput(in.Method, act)
	}
}

// retryKeys are the members of a modern client's retried request.
var retryKeys = []string{"requestState", "inputResponses"}

// retryMembers reads a request's requestState and inputResponses (nil
// when absent) from ms, or else in one pass over its params, which can be
// megabytes.
func retryMembers(params json.RawMessage, ms *Members) (state, answers json.RawMessage) {
	var v [2][]byte
	if !ms.Fields(params, retryKeys, v[:]) {
		// Present twice or under another case: read as before, one by one.
		v[0], _ = Member(params, retryKeys[0])
		v[1], _ = Member(params, retryKeys[1])
	}
	return v[0], v[1]
}

// stringOf is the JSON string raw ("" when absent or not a string).
func stringOf(raw []byte) string {
	s, _ := String(raw)
	return s
}

// resultType is the result's resultType ("" when absent), from ms when
// it lists res.
func resultType(res json.RawMessage, ms *Members) string {
	v, _ := ms.Member(res, "resultType")
	return stringOf(v)
}

// recordAnswers notes the actions of a modern client's inputResponses
// (raw, nil when absent).
func recordAnswers(raw json.RawMessage, stats *Stats) {
	if stats == nil || raw == nil {
		return
	}
	var answers map[string]json.RawMessage
	if json.Unmarshal(raw, &answers) != nil {
		return
	}
	for _, a := range answers {
		if act := StringMember(a, "action"); act != "" {
			stats.addInput(MethodElicitation, act)
		} else if _, ok := Member(a, "roots"); ok {
			stats.addInput(MethodRoots, "accept")
		} else {
			stats.addInput(MethodSampling, "accept")
		}
	}
}

// IsRPCError reports whether err is a JSON-RPC error to pass to the client.
func IsRPCError(err error) (*RPCError, bool) {
	var rpc *RPCError
	ok := errors.As(err, &rpc)
	return rpc, ok
}
