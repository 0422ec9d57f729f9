package api

import "encoding/json"

// Tool is one upstream tool as proxyd exposes it.
type Tool struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`               // the upstream's own name
	Exposed     string          `json:"exposed_name"`       // the name clients see: the server's prefix and Name
	LeftOut     string          `json:"left_out,omitempty"` // why clients do not see the tool, when they do not
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	ReadOnly    bool            `json:"read_only"`
	Destructive bool            `json:"destructive"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// CallRequest is POST /v1/call.
type CallRequest struct {
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
	// Stream asks for the call's events (see CallEvent); Elicitation says
	// the caller can answer elicitation requests.
	Stream      bool `json:"stream,omitempty"`
	Elicitation bool `json:"elicitation,omitempty"`
	// CheckSchema: check the arguments against the tool's input schema
	// before sending (the command line's KEY=VALUE arguments); a mismatch
	// is refused as the caller's fault.
	CheckSchema bool `json:"check_schema,omitempty"`
	// LogLevel, on a streamed call, is the least severe of the upstream's
	// log messages to stream (a logging/setLevel level; empty: the
	// upstream is asked for none).
	LogLevel string `json:"log_level,omitempty"`
}

// CallResponse carries the upstream's result as it came, or the failure
// classified by the call-error taxonomy.
type CallResponse struct {
	RequestID  string          `json:"request_id"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	DurationMS float64         `json:"duration_ms"`
	IsError    bool            `json:"is_error"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *CallError      `json:"error,omitempty"`
}

// CallError is a failed call, classified.
type CallError struct {
	Message            string `json:"message"`
	ErrorClass         string `json:"error_class"`
	FaultDomain        string `json:"fault_domain"`
	UpstreamHTTPStatus int    `json:"upstream_http_status,omitempty"`
	Reason             string `json:"reason,omitempty"`
	// NotFound names what the request named that does not exist:
	// "server", "tool", "prompt" or "resource" (the message says which
	// and the nearest name, if any).
	NotFound string `json:"not_found,omitempty"`
	// JSONRPCCode and JSONRPCData are the JSON-RPC error the call was
	// answered with, when it was (its data redacted): -32042's data, say,
	// holds the URLs the server asks the user to open.
	JSONRPCCode int             `json:"jsonrpc_code,omitempty"`
	JSONRPCData json.RawMessage `json:"jsonrpc_data,omitempty"`
}
