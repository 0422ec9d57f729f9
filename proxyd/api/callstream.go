package api

import (
	"context"
	"encoding/json"
	"net/http"
)

// A call with CallRequest.Stream set is answered with NDJSON CallEvents:
// "started" first (with the request id), then what the upstream sends
// during the call (progress, log messages, requests for input), and
// "result" last. The caller answers an "input" event with POST
// /v1/call/input and may cancel the call with POST /v1/call/cancel.

// Call events.
const (
	EventStarted        = "started"
	EventProgress       = "progress"
	EventLog            = "log"
	EventInput          = "input"
	EventInputCancelled = "input_cancelled"
	EventRefused        = "refused"
	EventResult         = "result"
)

// CallEvent is one line of a streamed call.
type CallEvent struct {
	Event     string         `json:"event"`
	RequestID string         `json:"request_id,omitempty"`
	Progress  *ProgressEvent `json:"progress,omitempty"`
	Log       *LogEvent      `json:"log,omitempty"`
	Input     *InputEvent    `json:"input,omitempty"`
	Refused   *RefusedEvent  `json:"refused,omitempty"`
	Result    *CallResponse  `json:"result,omitempty"`
}

// ProgressEvent is a notifications/progress of the upstream.
type ProgressEvent struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

// LogEvent is a notifications/message (log message) of the upstream.
type LogEvent struct {
	Level  string          `json:"level"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// InputEvent is a request of the upstream for input (elicitation/create),
// to be answered with POST /v1/call/input; input_cancelled withdraws it.
type InputEvent struct {
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	// TimedOut, on input_cancelled: the call's deadline ended the
	// request, not the server.
	TimedOut bool `json:"timed_out,omitempty"`
}

// RefusedEvent is a request of the upstream that proxyd refused for the
// caller, which cannot answer it (sampling: the CLI has no model).
type RefusedEvent struct {
	Method string `json:"method"`
	Reason string `json:"reason"`
}

// CallInput is POST /v1/call/input: the answer to an input event.
type CallInput struct {
	RequestID string          `json:"request_id"`
	ID        string          `json:"id"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *InputError     `json:"error,omitempty"`
}

// InputError answers an input event with an error.
type InputError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// CallCancel is POST /v1/call/cancel.
type CallCancel struct {
	RequestID string `json:"request_id"`
}

// CallStream is POST /v1/call with req.Stream set: the call's events.
func (c *Client) CallStream(ctx context.Context, req CallRequest) (*Stream[CallEvent], error) {
	req.Stream = true
	return openStream[CallEvent](ctx, c, http.MethodPost, "/v1/call", req)
}

// AnswerInput is POST /v1/call/input.
func (c *Client) AnswerInput(ctx context.Context, in CallInput) error {
	return c.do(ctx, http.MethodPost, "/v1/call/input", in, nil)
}

// CancelCall is POST /v1/call/cancel.
func (c *Client) CancelCall(ctx context.Context, requestID string) error {
	return c.do(ctx, http.MethodPost, "/v1/call/cancel", CallCancel{RequestID: requestID}, nil)
}
