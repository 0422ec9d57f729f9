package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A legacy upstream asks for input in the middle of a call, with a request
// of its own, and waits for the answer. A modern client cannot take that
// request: it takes an input_required result and retries its request with
// the answers. proxyd bridges the two by parking the call: the upstream
// call keeps running, the client gets the upstream's pending requests in
// an input_required result with a requestState naming the parked call,
// and its retry hands the answers to the waiting upstream requests and
// picks the call up again.

// parkTTL bounds how long a parked call waits for the client's retry.
const parkTTL = 5 * time.Minute

// maxParked bounds the calls waiting for their clients' retries that are
// still running: each holds an upstream request open. maxParkedEnded
// bounds those that ended meanwhile (the call's timeout, an upstream
// failure, a result), each kept for its retry: at that bound the one
// that ended first is let go, so ended calls never keep a new one from
// waiting.
const (
	maxParked      = 256
	maxParkedEnded = 256
)

// parkPrefix marks the requestState values proxyd issues.
const parkPrefix = "mcpx1."

func isParkToken(s string) bool { return strings.HasPrefix(s, parkPrefix) }

type parkTable struct {
	mu     sync.Mutex
	calls  map[string]*parked
	closed bool // proxyd is stopping: no call waits for a retry
}

func newParkTable() *parkTable { return &parkTable{calls: map[string]*parked{}} }

func (t *parkTable) remove(p *parked) {
	token := p.currentToken()
	if token == "" {
		return
	}
	t.mu.Lock()
	if t.calls[token] == p {
		delete(t.calls, token)
	}
	t.mu.Unlock()
}

// take claims a parked call for one round; nil when unknown or in use.
func (t *parkTable) take(token string) *parked {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.calls[token]
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.round != nil {
		return nil
	}
	if p.expiry != nil {
		p.expiry.Stop()
	}
	return p
}

func (t *parkTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	calls := make([]*parked, 0, len(t.calls))
	for _, p := range t.calls {
		calls = append(calls, p)
	}
	t.calls = map[string]*parked{}
	t.mu.Unlock()
	for _, p := range calls {
		p.cancel()
	}
}

// parked is one upstream call that may wait between a client's rounds.
type parked struct {
	token  string
	method string
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	res    json.RawMessage
	err    error
	// resMembers lists res's members (see Exchange.Result).
	resMembers *Members

	// The first round runs on its request's goroutine: client is that
	// request's context, first its client side, answer its Answer, and
	// answered closes once the helper that answers it early is done.
	relayer  *Relayer
	client   context.Context
	first    *handler
	answer   func(json.RawMessage, error)
	answered chan struct{}

	mu      sync.Mutex
	stage   stage
	ended   time.Time // when the call ended (zero while it runs)
	helping bool      // a helper watches the first round
	round   *handler  // the client's current round (nil while parked)
	caps    Caps      // the client's capabilities, as of its last round
	asks    map[string]*ask
	order   []string
	seq     int
	wake    chan struct{}
	expiry  *time.Timer
}

// stage is where a parked call's first round is.
type stage int

const (
	// inFirst: the call runs on its first round's request goroutine.
	inFirst stage = iota
	// answeredEarly: the first round was answered (the upstream asked for
	// input) while the call went on; later rounds pick it up.
	answeredEarly
	// overInFirst: the call ended within its first round, which the
	// request goroutine answers.
	overInFirst
)

type ask struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage
}

func newParkToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return parkPrefix + hex.EncodeToString(b)
}

// park runs a legacy upstream call for a modern client on the caller's
// goroutine: most calls never ask for input and end there. When the
// upstream asks, a helper (helpFirst) answers the client's round early
// with the pending requests and a requestState naming the call, and the
// call goes on here; its result then waits for the client's retry.
func (r *Relayer) park(ctx context.Context, up Upstream, ex *Exchange, req *Request, peer Peer) (json.RawMessage, error) {
	// The call may outlive the client's request that started it: it
	// keeps the request's values and deadline, not its cancellation.
	cctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(cctx, dl)
	} else {
		cctx, cancel = context.WithTimeout(cctx, parkTTL)
	}
	// The round is attached before the call starts: a notification the
	// upstream sends at once has a client to go to. The call joins the
	// table (with a token) only when it first waits for the client.
	h := &handler{peer: peer, token: req.ProgressToken, stats: req.Stats}
	p := &parked{method: ex.Method, name: ex.Name, cancel: cancel, done: make(chan struct{}),
		relayer: r, client: ctx, first: h, answer: req.Answer, answered: make(chan struct{}),
		round: h, asks: map[string]*ask{}, wake: make(chan struct{}, 1), caps: peer.Caps()}
	ex.Handler = p
	// The client leaving during its first round ends the call, as in any
	// round; once that round is answered, the call waits for the retry.
	stop := context.AfterFunc(ctx, func() {
		if p.inStage(inFirst) {
			cancel()
		}
	})
	res, err := up.Relay(cctx, ex)
	stop()
	p.res, p.resMembers, p.err = res, ex.Result, err
	p.mu.Lock()
	early := p.stage == answeredEarly
	if !early {
		p.stage = overInFirst
		p.round = nil
	}
	p.ended = time.Now()
	p.mu.Unlock()
	close(p.done)
	// Over: release the deadline's timer and what the context holds (the
	// client request's values) now, not at the deadline.
	cancel()
	if early {
		// The request's handler must not end before its answer is out.
		<-p.answered
		return nil, ErrAnswered
	}
	if err != nil {
		return nil, err
	}
	return shaped(peer, res, ex.Result, Modern), nil
}

// helpFirst watches a call's first round once the upstream asks for
// input, and answers the round early when the call does not end first.
func (r *Relayer) helpFirst(p *parked) {
	defer close(p.answered)
	for {
		select {
		case <-p.done:
			return // the call ended in its first round: its caller answers
		case <-p.client.Done():
			return // the client left: the call ends (see park)
		case <-p.wake:
			if !p.hasAsks() {
				continue
			}
			if done := p.gather(p.client); done {
				continue
			}
			p.mu.Lock()
			claimed := p.stage == inFirst
			if claimed {
				p.stage = answeredEarly
			}
			p.mu.Unlock()
			if claimed {
				p.answer(r.askClient(p, p.first))
			}
			return
		}
	}
}

// resume picks a parked call up again with the client's answers.
func (r *Relayer) resume(ctx context.Context, token string, raw json.RawMessage, req *Request, peer Peer) (json.RawMessage, bool, error) {
	p := r.parked.take(token)
	if p == nil {
		return nil, false, nil
	}
	if p.method != req.Exchange.Method || p.name != req.Exchange.Name {
		r.parked.rearm(p)
		return nil, true, &RPCError{Code: CodeInvalidParams, Message: "requestState belongs to another request", ByProxy: true}
	}
	var answers map[string]json.RawMessage
	if raw != nil {
		_ = json.Unmarshal(raw, &answers)
	}
	p.mu.Lock()
	p.caps = peer.Caps()
	for key, a := range answers {
		if q, ok := p.asks[key]; ok {
			delete(p.asks, key)
			req.Stats.addInput(q.method, action(q.method, a, nil))
			q.answer <- a
		}
	}
	p.mu.Unlock()
	// Requests still unanswered are asked again at once.
	p.signal()
	res, err := r.run(ctx, p, &handler{peer: peer, token: req.ProgressToken, stats: req.Stats})
	return res, true, err
}

// run attaches a client round to p and waits until the call completes,
// needs input, or the client goes away.
func (r *Relayer) run(ctx context.Context, p *parked, h *handler) (json.RawMessage, error) {
	p.attach(h)
	for {
		select {
		case <-p.done:
			p.attach(nil)
			r.parked.remove(p)
			if p.err != nil {
				return nil, p.err
			}
			return shaped(h.peer, p.res, p.resMembers, Modern), nil
		case <-p.wake:
			if !p.hasAsks() {
				continue
			}
			if done := p.gather(ctx); done {
				continue // the call completed or the client left: handled above
			}
			return r.askClient(p, h)
		case <-ctx.Done():
			// The client cancelled or went away during its round.
			p.attach(nil)
			p.cancel()
			r.parked.remove(p)
			return nil, ctx.Err()
		}
	}
}

// askClient ends the client's round h with the upstream's pending
// requests as an input_required result; p waits for the retry.
func (r *Relayer) askClient(p *parked, h *handler) (json.RawMessage, error) {
	p.attach(nil)
	res, missing := p.inputRequired()
	if missing != "" {
		// The upstream needs what the client did not declare: a modern
		// server answers that with -32021.
		p.cancel()
		r.parked.remove(p)
		h.stats.addInput(missingMethod(missing), "refused")
		return nil, missingCapability(missing)
	}
	if err := r.parked.rekey(p); err != nil {
		p.cancel()
		return nil, err
	}
	res = WithMember(res, "requestState", AppendString(nil, p.currentToken()))
	recordRequests(res, nil, h.stats, "asked")
	return res, nil
}

// Requests the upstream sends together are asked together: a round
// waits until no more arrive for a moment (gather).
//
// gatherWait is how long a round waits for more of the upstream's
// requests after one arrives; gatherMax bounds the whole wait. A server
// built on the MCP library sends one round's requests on two streams at
// once (elicitation on the call's, sampling and roots on the GET
// stream), read by two goroutines scheduled apart: on a loaded machine
// the second may lag the first, and a round split in two asks the client
// twice. The client is about to be asked for input, so tens of
// milliseconds more cost nothing.
const (
	gatherWait = 25 * time.Millisecond
	gatherMax  = 250 * time.Millisecond
)

// gather waits until the upstream has sent the requests it sends at once;
// true when the call completed or the client left meanwhile.
func (p *parked) gather(ctx context.Context) bool {
	deadline := time.NewTimer(gatherMax)
	defer deadline.Stop()
	for {
		quiet := time.NewTimer(gatherWait)
		select {
		case <-p.wake:
			quiet.Stop()
			continue
		case <-quiet.C:
			return false
		case <-deadline.C:
			quiet.Stop()
			return false
		case <-p.done:
			quiet.Stop()
			p.signal() // let run see the outcome
			return true
		case <-ctx.Done():
			quiet.Stop()
			return true
		}
	}
}

// attach makes h the client's current round (nil: none).
func (p *parked) attach(h *handler) {
	p.mu.Lock()
	p.round = h
	p.mu.Unlock()
}

func (p *parked) inStage(st stage) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stage == st
}

func (p *parked) hasAsks() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asks) > 0
}

// rekey gives p a new token for its next round, so every input_required
// carries a requestState of its own; an error when p cannot wait.
func (t *parkTable) rekey(p *parked) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.mu.Lock()
	old := p.token
	p.mu.Unlock()
	if t.closed {
		return errors.New("proxyd is stopping: the call cannot wait for the client's input")
	}
	if old == "" && !t.makeRoomLocked() {
		return fmt.Errorf("proxyd holds %d calls waiting for their clients' input already; try again later", maxParked)
	}
	token := newParkToken()
	p.mu.Lock()
	p.token = token
	p.mu.Unlock()
	delete(t.calls, old)
	t.calls[token] = p
	t.rearmLocked(p)
	return nil
}

// makeRoomLocked reports whether a call may start to wait: fewer than
// maxParked running calls wait, and if maxParkedEnded ended ones wait for
// their retries, the one that ended first is let go (its retry is told
// the requestState expired). Under t.mu.
func (t *parkTable) makeRoomLocked() bool {
	running := 0
	var oldest *parked
	var oldestEnd time.Time
	for _, p := range t.calls {
		p.mu.Lock()
		end := p.ended
		p.mu.Unlock()
		switch {
		case end.IsZero():
			running++
		case oldest == nil || end.Before(oldestEnd):
			oldest, oldestEnd = p, end
		}
	}
	if running >= maxParked {
		return false
	}
	if len(t.calls)-running >= maxParkedEnded {
		oldest.mu.Lock()
		if oldest.expiry != nil {
			oldest.expiry.Stop()
		}
		delete(t.calls, oldest.token)
		oldest.mu.Unlock()
	}
	return true
}

func (p *parked) currentToken() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token
}

// rearm parks p (again) until the client's retry, at most parkTTL.
func (t *parkTable) rearm(p *parked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rearmLocked(p)
}

func (t *parkTable) rearmLocked(p *parked) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expiry != nil {
		p.expiry.Stop()
	}
	p.expiry = time.AfterFunc(parkTTL, func() {
		p.cancel()
		t.remove(p)
	})
}

// inputRequired is the result asking the client for p's pending requests
// it can answer; the requests it cannot are held back. missing names a
// capability the upstream needs that the client did not declare, when
// every pending request needs one.
func (p *parked) inputRequired() (json.RawMessage, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reqs := make(map[string]json.RawMessage, len(p.asks))
	missing := ""
	for _, key := range p.order {
		q, ok := p.asks[key]
		if !ok {
			continue
		}
		if !p.caps.Accepts(q.method, q.params) {
			if missing == "" {
				missing = capabilityOf(q.method)
			}
			continue
		}
		b, _ := json.Marshal(struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{q.method, q.params})
		reqs[key] = b
	}
	if len(reqs) > 0 {
		missing = ""
	}
	body, _ := json.Marshal(struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}{resultInputRequired, reqs})
	return body, missing
}

// missingCapability is the modern era's MissingRequiredClientCapabilityError:
// its data names the capability as a ClientCapabilities object.
func missingCapability(capability string) *RPCError {
	data, _ := json.Marshal(map[string]map[string]map[string]any{"requiredCapabilities": {capability: {}}})
	return &RPCError{Code: CodeMissingCapability, Message: fmt.Sprintf("missing required client capability: %q", capability), Data: data, ByProxy: true}
}

// capabilityOf names the client capability behind a request method.
func capabilityOf(method string) string {
	switch method {
	case MethodSampling:
		return "sampling"
	case MethodRoots:
		return "roots"
	}
	return "elicitation"
}

func missingMethod(capability string) string {
	switch capability {
	case "sampling":
		return MethodSampling
	case "roots":
		return MethodRoots
	}
	return MethodElicitation
}

func (p *parked) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Notify passes the upstream's notification to the client's current
// round; while parked there is nobody to pass it to.
func (p *parked) Notify(method string, params json.RawMessage) {
	if h := p.current(); h != nil {
		h.Notify(method, params)
	}
}

// NotifyHeld is Notify for a notification that may wait for what follows
// (see HeldNotifier).
func (p *parked) NotifyHeld(method string, params json.RawMessage) {
	if h := p.current(); h != nil {
		h.NotifyHeld(method, params)
	}
}

// Flush sends the notifications held for the current round's client.
func (p *parked) Flush() {
	if h := p.current(); h != nil {
		h.Flush()
	}
}

func (p *parked) current() *handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.round
}

// Attended: a client round is attached (the client waits on its request).
func (p *parked) Attended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.round != nil
}

// Owner is "": a modern client's call is a client of its own.
func (p *parked) Owner() string { return "" }

func (p *parked) Accepts(method string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caps.acceptsAny(method)
}

// Ask holds the upstream's request until a round of the client answers it.
// A request the client did not declare the capability for is held back
// too: if nothing else is pending, the round ends with -32021.
func (p *parked) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	p.mu.Lock()
	if p.stage == inFirst && p.answer == nil {
		// Nobody can take the client's round early (see Request.Answer).
		p.mu.Unlock()
		p.first.stats.addInput(method, "refused")
		return nil, Refusal(method)
	}
	if p.stage == inFirst && !p.helping {
		p.helping = true
		go p.relayer.helpFirst(p)
	}
	p.seq++
	key := "mcpx-" + strconv.Itoa(p.seq)
	q := &ask{method: method, params: params, answer: make(chan json.RawMessage, 1)}
	p.asks[key] = q
	p.order = append(p.order, key)
	p.mu.Unlock()
	p.signal()
	select {
	case a := <-q.answer:
		return a, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.asks, key)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}
