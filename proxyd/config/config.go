// Package config reads, validates and edits mcpx's YAML configuration file.
//
// The file lists the upstream MCP servers proxyd fronts, the loopback address
// of the downstream endpoint and the retention of the activity log. Every
// problem is reported with the file, line and column it comes from and a fix.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/secretref"
)

// Config is the whole file.
type Config struct {
	Listen   string         `yaml:"listen,omitempty" json:"listen,omitempty"` // downstream MCP endpoint, loopback host:port; default DefaultListen
	Activity ActivityConfig `yaml:"activity,omitempty" json:"activity,omitzero"`
	Limits   Limits         `yaml:"limits,omitempty" json:"limits,omitzero"`
	Servers  []Server       `yaml:"servers,omitempty" json:"servers,omitempty"`
	State    StateConfig    `yaml:"state,omitempty" json:"state,omitzero"`
	// MetricsListen, when set, serves /metrics (Prometheus), /livez and
	// /readyz over TCP on host:port, for scrapers and load balancers.
	MetricsListen string `yaml:"metrics_listen,omitempty" json:"metrics_listen,omitempty"`

	// src locates parsed values for Validate; empty for a Config built in code.
	src *source
}

// ActivityConfig bounds the activity log.
type ActivityConfig struct {
	MaxAge  Duration `yaml:"max_age,omitempty" json:"max_age,omitempty"`   // retention by age, default DefaultActivityMaxAge
	MaxRows int      `yaml:"max_rows,omitempty" json:"max_rows,omitempty"` // retention by count, default DefaultActivityMaxRows
	// Durability is batch (default: records are committed in batches, a
	// crash loses the last ~50 ms) or sync (a call returns once its record
	// is committed).
	Durability string `yaml:"durability,omitempty" json:"durability,omitempty"`
}

// StateConfig chooses where proxyd keeps its state. Empty: the SQLite
// file in the state dir.
type StateConfig struct {
	// Postgres is a PostgreSQL DSN shared by replicas. A password may
	// appear only as a ${env:NAME} or ${file:PATH} reference (or come from
	// PGPASSWORD or a passfile); MCPX_STATE_DSN overrides it.
	Postgres string `yaml:"postgres,omitempty" json:"postgres,omitempty"`
}

// EnvStateDSN overrides state.postgres.
const EnvStateDSN = "MCPX_STATE_DSN"

// StateDSN is the PostgreSQL DSN proxyd uses, references resolved, or ""
// for the SQLite default.
func (c *Config) StateDSN() (string, error) {
	if v := os.Getenv(EnvStateDSN); v != "" {
		return v, nil
	}
	if c.State.Postgres == "" {
		return "", nil
	}
	dsn, err := secretref.Expand(c.State.Postgres)
	if err != nil {
		return "", fmt.Errorf("state.postgres: %w", err)
	}
	return dsn, nil
}

// Server is one upstream MCP server: either remote (URL) or a local child
// process speaking stdio (Command).
type Server struct {
	Name      string `yaml:"name" json:"name"`
	URL       string `yaml:"url,omitempty" json:"url,omitempty"`
	Transport string `yaml:"transport,omitempty" json:"transport,omitempty"` // streamable-http (default when url set) | sse | stdio (default when command set)
	Protocol  string `yaml:"protocol,omitempty" json:"protocol,omitempty"`   // auto (default) | legacy | modern
	// Prefix goes before the server's tool and prompt names as clients see
	// them: absent means "<name>__", "" exposes the upstream's names as
	// they are. A pointer, because absent and "" differ.
	Prefix   *string           `yaml:"prefix,omitempty" json:"prefix,omitempty"`
	Headers  map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	TLS      *TLS              `yaml:"tls,omitempty" json:"tls,omitempty"`
	OAuth    *OAuth            `yaml:"oauth,omitempty" json:"oauth,omitempty"`
	Command  string            `yaml:"command,omitempty" json:"command,omitempty"`
	Args     []string          `yaml:"args,omitempty" json:"args,omitempty"`
	Env      map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	Disabled bool              `yaml:"disabled,omitempty" json:"disabled,omitempty"`
	Timeout  Duration          `yaml:"timeout,omitempty" json:"timeout,omitempty"` // per-call timeout, default DefaultCallTimeout
	// MaxResponseBytes bounds one HTTP response body from the server;
	// default DefaultMaxResponseBytes.
	MaxResponseBytes int `yaml:"max_response_bytes,omitempty" json:"max_response_bytes,omitempty"`
	// StreamIdleTimeout closes a standing event stream silent this long;
	// default DefaultStreamIdleTimeout.
	StreamIdleTimeout Duration `yaml:"stream_idle_timeout,omitempty" json:"stream_idle_timeout,omitempty"`
}

// TLS adjusts certificate verification for a remote server.
type TLS struct {
	CAFile string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"` // PEM bundle trusted in addition to the system roots
}

// OAuth configures sign-in to a protected remote server. Every field is
// optional for the default grant: discovery and dynamic registration fill
// in what is missing. Secrets (client_secret, private_key, assertion, the
// identity provider's id_token and client_secret) are ${env:NAME} or
// ${file:PATH} references, resolved by proxyd each time it uses them.
type OAuth struct {
	// Grant is how proxyd obtains tokens: GrantAuthorizationCode (default,
	// a browser sign-in), GrantClientCredentials, GrantJWTBearer (workload
	// identity) or GrantTokenExchange (enterprise-managed authorization).
	Grant        string   `yaml:"grant,omitempty" json:"grant,omitempty"`
	ClientID     string   `yaml:"client_id,omitempty" json:"client_id,omitempty"`
	ClientSecret string   `yaml:"client_secret,omitempty" json:"client_secret,omitempty"`
	Scopes       []string `yaml:"scopes,omitempty" json:"scopes,omitempty"`
	// PrivateKey is the client's PEM private key (EC P-256 or RSA) for
	// private_key_jwt client authentication, by reference.
	PrivateKey string `yaml:"private_key,omitempty" json:"private_key,omitempty"`
	// TokenEndpointAuthMethod overrides how the client authenticates at
	// the token endpoint: client_secret_basic, client_secret_post,
	// private_key_jwt or none. Default: private_key_jwt with a key,
	// client_secret_basic with a secret (post when the server lists only
	// that), none otherwise.
	TokenEndpointAuthMethod string `yaml:"token_endpoint_auth_method,omitempty" json:"token_endpoint_auth_method,omitempty"`
	// Assertion is the workload identity token (a JWT) the jwt_bearer
	// grant presents, by reference; it is read again at every exchange.
	Assertion string `yaml:"assertion,omitempty" json:"assertion,omitempty"`
	// IdentityProvider is the enterprise IdP of the token_exchange grant.
	IdentityProvider *IdentityProvider `yaml:"identity_provider,omitempty" json:"identity_provider,omitempty"`
	// DPoP sender-constrains the tokens (RFC 9449) when the authorization
	// server supports it.
	DPoP                    bool   `yaml:"dpop,omitempty" json:"dpop,omitempty"`
	AuthorizationEndpoint   string `yaml:"authorization_endpoint,omitempty" json:"authorization_endpoint,omitempty"`
	TokenEndpoint           string `yaml:"token_endpoint,omitempty" json:"token_endpoint,omitempty"`
	RegistrationEndpoint    string `yaml:"registration_endpoint,omitempty" json:"registration_endpoint,omitempty"`
	AuthServerMetadataURL   string `yaml:"auth_server_metadata_url,omitempty" json:"auth_server_metadata_url,omitempty"`
	ClientMetadataURL       string `yaml:"client_metadata_url,omitempty" json:"client_metadata_url,omitempty"`               // CIMD client id URL
	AllowMissingPKCEMethods bool   `yaml:"allow_missing_pkce_methods,omitempty" json:"allow_missing_pkce_methods,omitempty"` // proceed with S256 when the AS omits code_challenge_methods_supported
}

// IdentityProvider is the enterprise identity provider that exchanges the
// user's ID token for an identity assertion grant (ID-JAG, SEP-990).
type IdentityProvider struct {
	Issuer        string `yaml:"issuer,omitempty" json:"issuer,omitempty"`                 // discovered for its token endpoint
	TokenEndpoint string `yaml:"token_endpoint,omitempty" json:"token_endpoint,omitempty"` // instead of discovery
	ClientID      string `yaml:"client_id,omitempty" json:"client_id,omitempty"`
	ClientSecret  string `yaml:"client_secret,omitempty" json:"client_secret,omitempty"` // by reference; none for a public client
	IDToken       string `yaml:"id_token,omitempty" json:"id_token,omitempty"`           // by reference, read at every exchange
}

// OAuth grants.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "jwt_bearer"
	GrantTokenExchange     = "token_exchange"
)

// EffectiveGrant is the grant o configures; the default for a nil OAuth.
func (o *OAuth) EffectiveGrant() string {
	if o == nil || o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

// Overrides are the OAuth discovery overrides these settings configure;
// none for a nil OAuth.
func (o *OAuth) Overrides() discovery.Overrides {
	if o == nil {
		return discovery.Overrides{}
	}
	return discovery.Overrides{
		AuthorizationEndpoint: o.AuthorizationEndpoint,
		TokenEndpoint:         o.TokenEndpoint,
		RegistrationEndpoint:  o.RegistrationEndpoint,
		AuthServerMetadataURL: o.AuthServerMetadataURL,
	}
}

// DefaultListen is the downstream MCP endpoint when the file sets none.
const DefaultListen = "127.0.0.1:7861"

// Defaults for optional settings.
const (
	DefaultActivityMaxAge  = 30 * 24 * time.Hour
	DefaultActivityMaxRows = 1_000_000
	DefaultCallTimeout     = 60 * time.Second
	// DefaultMaxResponseBytes bounds an upstream HTTP response (16 MiB).
	DefaultMaxResponseBytes = 16 << 20
)

// Upstream transports.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
	TransportStdio          = "stdio"
)

// Protocol eras: legacy is the session-based era, modern the session-less
// one; auto negotiates.
const (
	ProtocolAuto   = "auto"
	ProtocolLegacy = "legacy"
	ProtocolModern = "modern"
)

// DefaultPath is $XDG_CONFIG_HOME/mcpx/config.yaml, else
// ~/.config/mcpx/config.yaml.
func DefaultPath() string {
	if dir := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "mcpx", "config.yaml")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		// No home: a relative path is still better than failing to start.
		return filepath.Join(".config", "mcpx", "config.yaml")
	}
	return filepath.Join(home, ".config", "mcpx", "config.yaml")
}

// Load reads, validates and applies defaults to the file at path. A missing
// file is an empty configuration, not an error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c := &Config{}
		c.ApplyDefaults()
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes, validates and applies defaults to data; path is used in
// error messages only.
func Parse(path string, data []byte) (*Config, error) {
	c, err := decode(path, data)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.ApplyDefaults()
	return c, nil
}

// ApplyDefaults fills unset optional settings with their defaults, so
// printing the configuration shows what proxyd uses.
func (c *Config) ApplyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Activity.MaxAge == 0 {
		c.Activity.MaxAge = Duration(DefaultActivityMaxAge)
	}
	if c.Activity.MaxRows == 0 {
		c.Activity.MaxRows = DefaultActivityMaxRows
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		s.Transport = s.EffectiveTransport()
		s.Protocol = s.EffectiveProtocol()
		s.Timeout = Duration(s.CallTimeout())
	}
}

// Server returns the server called name.
func (c *Config) Server(name string) (*Server, bool) {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return &c.Servers[i], true
		}
	}
	return nil, false
}

// ListenAddr is the downstream endpoint's address.
func (c *Config) ListenAddr() string {
	if c.Listen == "" {
		return DefaultListen
	}
	return c.Listen
}

// ResolvedHeaders are the server's headers with their ${env:...} and
// ${file:...} references resolved: done when a connection is made, never
// written back. An error names the header and the reference, never a
// value.
func (s *Server) ResolvedHeaders() (map[string]string, error) {
	if len(s.Headers) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(s.Headers))
	for k, v := range s.Headers {
		x, err := secretref.Expand(v)
		if err != nil {
			return nil, fmt.Errorf("server %q: header %s: %w", s.Name, k, err)
		}
		out[k] = x
	}
	return out, nil
}

// SetsAuthorization reports whether the server's headers set its
// Authorization header (a static token, sent as it is).
func (s *Server) SetsAuthorization() bool {
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return true
		}
	}
	return false
}

// EffectiveTransport is the configured transport, else stdio for a command
// and streamable-http for a URL.
// Target is where the server is, as status shows it: its URL with the
// credentials in it masked, or its command line, each word quoted as a
// shell would need it (with secrets in it masked).
func (s *Server) Target() string {
	if s.EffectiveTransport() != TransportStdio {
		return redact.URL(s.URL)
	}
	words := make([]string, 0, 1+len(s.Args))
	for _, w := range append([]string{s.Command}, s.Args...) {
		words = append(words, shellWord(w))
	}
	return redact.Text(strings.Join(words, " "))
}

// shellWord quotes w for a POSIX shell when it needs it.
func shellWord(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func (s *Server) EffectiveTransport() string {
	switch {
	case s.Transport != "":
		return s.Transport
	case s.Command != "":
		return TransportStdio
	case s.URL != "":
		return TransportStreamableHTTP
	}
	return ""
}

// EffectiveProtocol is the configured protocol era, else auto.
func (s *Server) EffectiveProtocol() string {
	if s.Protocol == "" {
		return ProtocolAuto
	}
	return s.Protocol
}

// NameSeparator ends the default prefix: `<name>__<tool>`. Server names
// cannot contain "_", so the default prefix never hides inside a name.
const NameSeparator = "__"

// MaxPrefixLen bounds a configured prefix so that exposed names (at most
// 64 characters) keep room for the upstream's own name.
const MaxPrefixLen = 32

// ExposedPrefix is the configured prefix, else "<name>__".
func (s *Server) ExposedPrefix() string {
	if s.Prefix == nil {
		return s.Name + NameSeparator
	}
	return *s.Prefix
}

// CallTimeout bounds one call to this server.
func (s *Server) CallTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultCallTimeout
	}
	return time.Duration(s.Timeout)
}

// ResponseLimit bounds one HTTP response body from this server.
func (s *Server) ResponseLimit() int64 {
	if s.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return int64(s.MaxResponseBytes)
}
