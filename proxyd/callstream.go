package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/mcpx-dev/mcpx/internal/errtext"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// `mcpx call` sees what happens during its call: the call's events stream
// back as NDJSON (api.CallEvent), the CLI answers the upstream's requests
// for input with /v1/call/input and cancels with /v1/call/cancel. The CLI
// is a legacy-style client of the relay: it takes requests, declares
// elicitation when it can answer it, and never sampling (it has no model).

// streamedCalls are the streamed calls in flight, by request id.
type streamedCalls struct {
	mu    sync.Mutex
	calls map[string]*cliPeer
}

func (s *streamedCalls) add(id string, p *cliPeer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]*cliPeer{}
	}
	s.calls[id] = p
}

func (s *streamedCalls) remove(id string) {
	s.mu.Lock()
	delete(s.calls, id)
	s.mu.Unlock()
}

func (s *streamedCalls) get(id string) *cliPeer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id]
}

// cliPeer is the CLI's side of a streamed call.
type cliPeer struct {
	caps   relay.Caps
	cancel context.CancelFunc
	level  int // the call's log level's rank (-1: none asked, all shown)

	// asks are the upstream's requests being put to the CLI: the result
	// waits for them, so that a request the call's end made void is
	// said to be void (input_cancelled) before the result.
	asks sync.WaitGroup

	mu      sync.Mutex
	w       http.ResponseWriter
	ended   bool
	seq     int
	pending map[string]chan answerOrError
}

type answerOrError struct {
	result json.RawMessage
	err    error
}

func (p *cliPeer) Modern() bool     { return false }
func (p *cliPeer) Caps() relay.Caps { return p.caps }

// send writes one event line.
func (p *cliPeer) send(ev api.CallEvent) bool {
	b, err := json.Marshal(ev)
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return false
	}
	_, _ = p.w.Write(append(b, '\n'))
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

func (p *cliPeer) Notify(method string, params json.RawMessage) {
	switch method {
	case relay.MethodProgress:
		var pr api.ProgressEvent
		if json.Unmarshal(params, &pr) == nil {
			pr.Message = redact.Text(pr.Message)
			p.send(api.CallEvent{Event: api.EventProgress, Progress: &pr})
		}
	case relay.MethodMessage:
		var l api.LogEvent
		// A legacy upstream's level is the lowest any of proxyd's clients
		// asked for: what is below this call's is not shown.
		if json.Unmarshal(params, &l) == nil && relay.LogPasses(l.Level, p.level) {
			p.send(api.CallEvent{Event: api.EventLog, Log: &l})
		}
	}
}

func (p *cliPeer) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	p.asks.Add(1)
	defer p.asks.Done()
	p.mu.Lock()
	p.seq++
	id := "input-" + strconv.Itoa(p.seq)
	ch := make(chan answerOrError, 1)
	if p.pending == nil {
		p.pending = map[string]chan answerOrError{}
	}
	p.pending[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}()
	if !p.send(api.CallEvent{Event: api.EventInput, Input: &api.InputEvent{ID: id, Method: method, Params: params}}) {
		return nil, errors.New("mcpx call is gone")
	}
	select {
	case a := <-ch:
		return a.result, a.err
	case <-ctx.Done():
		p.send(api.CallEvent{Event: api.EventInputCancelled, Input: &api.InputEvent{ID: id, Method: method,
			TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}})
		return nil, ctx.Err()
	}
}

// Refused tells the CLI that the upstream asked for something it cannot
// answer (relay.Refuser).
func (p *cliPeer) Refused(method string) {
	reason := "the call's client did not declare the capability"
	if method == relay.MethodSampling {
		reason = "mcpx call has no model to sample with"
	}
	p.send(api.CallEvent{Event: api.EventRefused, Refused: &api.RefusedEvent{Method: method, Reason: reason}})
}

func (p *cliPeer) answer(in api.CallInput) bool {
	p.mu.Lock()
	ch, ok := p.pending[in.ID]
	p.mu.Unlock()
	if !ok {
		return false
	}
	a := answerOrError{result: in.Result}
	if in.Error != nil {
		a = answerOrError{err: &relay.RPCError{Code: in.Error.Code, Message: in.Error.Message}}
	}
	select {
	case ch <- a:
	default:
	}
	return true
}

// streamCall runs a call for `mcpx call`, streaming its events; typed
// is the tool's name as the user wrote it (see explainMissing).
func (d *Daemon) streamCall(ctx context.Context, w http.ResponseWriter, req api.CallRequest, typed string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &cliPeer{w: w, cancel: cancel, level: relay.LogLevelRank(req.LogLevel)}
	if req.Elicitation {
		p.caps = relay.Caps{ElicitForm: true, ElicitURL: true, Raw: json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)}
	}
	id := newRequestID()
	d.streamed.add(id, p)
	defer d.streamed.remove(id)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	p.send(api.CallEvent{Event: api.EventStarted, RequestID: id})
	// The CLI shows progress, so it asks for it.
	out := d.funnel(ctx, &relayed{server: req.Server, method: "tools/call", name: req.Tool, args: req.Arguments, peer: p,
		token: json.RawMessage(`"mcpx-call"`), logLevel: req.LogLevel,
		callMeta: downstream.CallMeta{Client: "cli", RequestID: id}})
	res := d.explainMissing(req, typed, callResponse(req, out))
	// The call is over, so every request still put to the CLI is void
	// (its context ended with the call) and returns at once.
	p.asks.Wait()
	p.send(api.CallEvent{Event: api.EventResult, Result: &res})
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	return nil
}

// callResponse is a call's outcome as the API gives it.
func callResponse(req api.CallRequest, out callOutcome) api.CallResponse {
	resp := api.CallResponse{
		RequestID: out.RequestID, Server: req.Server, Tool: req.Tool,
		DurationMS: float64(out.Duration.Microseconds()) / 1000,
	}
	if out.Result != nil {
		resp.Result = out.Result.Raw
		resp.IsError = out.Result.IsError
	}
	if out.Err != nil {
		resp.Error = callError(out)
	}
	return resp
}

// callError is a failed call's error as the API gives it.
func callError(out callOutcome) *api.CallError {
	e := &api.CallError{
		Message:            redact.Text(errtext.Dedupe(out.Err.Error())),
		ErrorClass:         out.Class.Class,
		FaultDomain:        out.Class.Domain,
		UpstreamHTTPStatus: out.Class.HTTPStatus,
		Reason:             out.Class.Reason,
	}
	var rpc *relay.RPCError
	if errors.As(out.Err, &rpc) {
		e.JSONRPCCode = rpc.Code
		if d := []byte(redact.Text(string(rpc.Data))); len(d) > 0 && json.Valid(d) {
			e.JSONRPCData = d
		}
	}
	return e
}

func (d *Daemon) handleCallInput(w http.ResponseWriter, r *http.Request) error {
	var in api.CallInput
	if err := decode(r, &in); err != nil {
		return err
	}
	p := d.streamed.get(in.RequestID)
	if p == nil || !p.answer(in) {
		return notFound("no call %q waits for input %q", in.RequestID, in.ID)
	}
	return writeJSON(w, map[string]string{"status": "answered"})
}

func (d *Daemon) handleCallCancel(w http.ResponseWriter, r *http.Request) error {
	var in api.CallCancel
	if err := decode(r, &in); err != nil {
		return err
	}
	p := d.streamed.get(in.RequestID)
	if p == nil {
		return notFound("no call %q is running", in.RequestID)
	}
	p.cancel()
	return writeJSON(w, map[string]string{"status": "cancelling"})
}
