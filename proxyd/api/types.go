// Package api holds the wire types of proxyd's control API (HTTP/1.1 + JSON
// over a Unix socket, under /v1/) and the Go client that the CLI and the
// tests use. The JSON field names are a stable, additive-only contract.
package api

import (
	"encoding/json"
	"strings"
	"time"
)

// Server states.
const (
	StateConnecting = "connecting"
	StateReady      = "ready"
	StateDegraded   = "degraded"
	StateError      = "error"
	StateDisabled   = "disabled"
)

// Status is GET /v1/status.
type Status struct {
	Version       string    `json:"version"`
	PID           int       `json:"pid"`
	StartedAt     time.Time `json:"started_at"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	Socket        string    `json:"socket"`
	Listen        string    `json:"listen"`
	MCPURL        string    `json:"mcp_url"`
	ConfigPath    string    `json:"config_path"`
	StateDir      string    `json:"state_dir"`
	// StateDB is where the state lives: "sqlite:PATH" or
	// "postgres:postgres://USER@HOST/DB" (never a password).
	StateDB string `json:"state_db,omitempty"`
	// Replica is this proxyd's id among those sharing the state.
	Replica     string         `json:"replica,omitempty"`
	ConfigError string         `json:"config_error,omitempty"`
	Servers     []ServerStatus `json:"servers"`
}

// ServerStatus is one upstream's state as proxyd sees it.
type ServerStatus struct {
	Name string `json:"name"`
	// Replica is the proxyd reporting this state (health across replicas).
	Replica         string     `json:"replica,omitempty"`
	Transport       string     `json:"transport"`
	Target          string     `json:"target"` // URL (redacted) or command line
	Protocol        string     `json:"protocol"`
	Era             string     `json:"era,omitempty"` // legacy | modern, once connected
	ProtocolVersion string     `json:"protocol_version,omitempty"`
	ServerName      string     `json:"server_name,omitempty"`
	ServerVersion   string     `json:"server_version,omitempty"`
	State           string     `json:"state"`
	Summary         string     `json:"summary,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	Since           time.Time  `json:"since"`
	NextRetry       *time.Time `json:"next_retry,omitempty"`
	Attempts        int        `json:"attempts,omitempty"`
	Tools           int        `json:"tools"`
	Prompts         int        `json:"prompts"`
	Resources       int        `json:"resources"`
	SessionID       string     `json:"session_id,omitempty"` // 8-character prefix only
	Reinits         int64      `json:"reinits"`
	Health          *Health    `json:"health,omitempty"`
	// Warnings are problems that leave the server working, such as a tool
	// left out because another server already exposes its name.
	Warnings []string `json:"warnings,omitempty"`
}

// Health is the rolling window of tool-call outcomes of one server.
type Health struct {
	Calls         int    `json:"calls"`
	Failed        int    `json:"failed"`
	DominantClass string `json:"dominant_class,omitempty"`
	Degraded      bool   `json:"degraded"`
	Summary       string `json:"summary"`
}

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
}

// ServerRequest is POST /v1/servers (add) — the config entry as JSON.
type ServerRequest struct {
	Server json.RawMessage `json:"server"`
}

// ReloadResponse is POST /v1/reload.
type ReloadResponse struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
}

// ConnectInfo is GET /v1/connect-info: what an MCP client needs.
type ConnectInfo struct {
	URL          string   `json:"url"`
	Header       string   `json:"header"`     // "Authorization: Bearer …" (token included: only over the socket)
	TokenFile    string   `json:"token_file"` // where the bearer lives (0600)
	StdioCommand []string `json:"stdio_command"`
}

// ErrorBody is the one error shape: {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of the control API.
const (
	CodeBadRequest  = "bad_request"
	CodeNotFound    = "not_found"
	CodeForbidden   = "forbidden"
	CodeConflict    = "conflict"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
	CodeMethod      = "method_not_allowed"
	// CodeNoRoute: this daemon has no such endpoint (an older version).
	CodeNoRoute = "no_route"
)

// SplitList reads a list filter of the activity API: values may be
// repeated (?server=a&server=b) or comma-separated (?server=a,b), and
// blanks are dropped. The CLI reads its repeatable flags the same way.
func SplitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
