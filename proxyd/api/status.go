package api

import "time"

// State is an upstream server's state as proxyd reports it.
type State string

// Server states.
const (
	StateConnecting State = "connecting"
	StateReady      State = "ready"
	StateDegraded   State = "degraded"
	StateError      State = "error"
	StateDisabled   State = "disabled"
	// StateUnknown: read from the record while proxyd is not running.
	StateUnknown State = "unknown"
)

// Phrase is the state as it reads after "is": "in error", "degraded".
func (s State) Phrase() string {
	switch s {
	case StateError:
		return "in error"
	case StateUnknown:
		return "in an unknown state"
	}
	return string(s)
}

// Status is GET /v1/status.
type Status struct {
	// Running is false only in what mcpx prints from the config while
	// proxyd is not running (status -o json): no daemon fields then.
	Running       bool      `json:"running"`
	Version       string    `json:"version"`
	PID           int       `json:"pid"`
	StartedAt     time.Time `json:"started_at,omitzero"` // none while proxyd is not running
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
	Replica string `json:"replica,omitempty"`
	// MetricsListen is the address of the metrics listener, when on.
	MetricsListen string `json:"metrics_listen,omitempty"`
	ConfigError   string `json:"config_error,omitempty"`
	// Stopping: a shutdown has begun; calls are drained, new ones
	// refused, and the socket goes once it ends.
	Stopping bool           `json:"stopping,omitempty"`
	Servers  []ServerStatus `json:"servers"`
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
	State           State      `json:"state"`
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

// ShutdownResponse is POST /v1/shutdown: proxyd is stopping.
type ShutdownResponse struct {
	Status string `json:"status"` // "stopping"
}
