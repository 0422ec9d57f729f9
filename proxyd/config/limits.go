package config

import (
	"fmt"
	"time"
)

// Limits bound what proxyd accepts from MCP clients and from upstreams, so
// that no client or server can exhaust its memory, descriptors or time.
// Zero means the default; every default is documented in the README.
type Limits struct {
	// MaxRequestBytes bounds one request body on every path (MCP endpoint,
	// stdio bridge, control socket); larger ones get 413.
	MaxRequestBytes int `yaml:"max_request_bytes,omitempty" json:"max_request_bytes,omitempty"`
	// MaxConnections caps open connections to the MCP endpoint; proxyd
	// lowers it to fit its descriptor limit.
	MaxConnections int `yaml:"max_connections,omitempty" json:"max_connections,omitempty"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout,omitempty" json:"read_header_timeout,omitempty"`
	// ReadTimeout bounds reading a request's body.
	ReadTimeout Duration `yaml:"read_timeout,omitempty" json:"read_timeout,omitempty"`
	// IdleTimeout closes a keep-alive connection with no request.
	IdleTimeout Duration `yaml:"idle_timeout,omitempty" json:"idle_timeout,omitempty"`
	// WriteStallTimeout disconnects an MCP client that takes none of what
	// proxyd writes to it (an answer, a stream) for this long.
	WriteStallTimeout Duration `yaml:"write_stall_timeout,omitempty" json:"write_stall_timeout,omitempty"`
	// MaxSessions caps live downstream sessions (legacy era); the least
	// recently used ends first.
	MaxSessions int `yaml:"max_sessions,omitempty" json:"max_sessions,omitempty"`
	// SessionIdleTimeout ends a downstream session unused this long.
	SessionIdleTimeout Duration `yaml:"session_idle_timeout,omitempty" json:"session_idle_timeout,omitempty"`
}

// Defaults of Limits.
const (
	DefaultMaxRequestBytes   = 4 << 20
	DefaultMaxConnections    = 1024
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultWriteStallTimeout = 30 * time.Second
	// DefaultStreamIdleTimeout: a standing event stream with no complete
	// line for this long is closed (and opened again).
	DefaultStreamIdleTimeout = 5 * time.Minute
)

// StreamIdle is how long a standing event stream from this server may stay
// without a complete line.
func (s *Server) StreamIdle() time.Duration {
	return orDuration(s.StreamIdleTimeout, DefaultStreamIdleTimeout)
}

// RequestBytes is the request body limit.
func (l Limits) RequestBytes() int64 { return int64(orInt(l.MaxRequestBytes, DefaultMaxRequestBytes)) }

// Connections is the configured connection cap of the MCP endpoint.
func (l Limits) Connections() int { return orInt(l.MaxConnections, DefaultMaxConnections) }

// HeaderTimeout bounds reading request headers.
func (l Limits) HeaderTimeout() time.Duration {
	return orDuration(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
}

// BodyTimeout bounds reading a request body.
func (l Limits) BodyTimeout() time.Duration { return orDuration(l.ReadTimeout, DefaultReadTimeout) }

// KeepAliveTimeout closes idle keep-alive connections.
func (l Limits) KeepAliveTimeout() time.Duration {
	return orDuration(l.IdleTimeout, DefaultIdleTimeout)
}

// WriteStall is how long a write to an MCP client may wait for it to take
// any of it.
func (l Limits) WriteStall() time.Duration {
	return orDuration(l.WriteStallTimeout, DefaultWriteStallTimeout)
}

func orInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func orDuration(v Duration, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return time.Duration(v)
}

var limitsFields = map[string]field{
	"max_request_bytes":    {kind: kInt, example: fmt.Sprintf("max_request_bytes: %d", DefaultMaxRequestBytes)},
	"max_connections":      {kind: kInt, example: fmt.Sprintf("max_connections: %d", DefaultMaxConnections)},
	"read_header_timeout":  {kind: kDuration, example: "read_header_timeout: 10s"},
	"read_timeout":         {kind: kDuration, example: "read_timeout: 30s"},
	"idle_timeout":         {kind: kDuration, example: "idle_timeout: 60s"},
	"write_stall_timeout":  {kind: kDuration, example: "write_stall_timeout: 30s"},
	"max_sessions":         {kind: kInt, example: "max_sessions: 1024"},
	"session_idle_timeout": {kind: kDuration, example: "session_idle_timeout: 1h"},
}

func (v *validator) limits(l Limits) {
	for _, c := range []struct {
		key string
		bad bool
	}{
		{"max_request_bytes", l.MaxRequestBytes < 0},
		{"max_connections", l.MaxConnections < 0},
		{"read_header_timeout", l.ReadHeaderTimeout < 0},
		{"read_timeout", l.ReadTimeout < 0},
		{"idle_timeout", l.IdleTimeout < 0},
		{"write_stall_timeout", l.WriteStallTimeout < 0},
		{"max_sessions", l.MaxSessions < 0},
		{"session_idle_timeout", l.SessionIdleTimeout < 0},
	} {
		if c.bad {
			v.add("limits."+c.key, "limits "+c.key+" must not be negative", "leave it out for the default, or see "+limitsFields[c.key].example)
		}
	}
}
