package api

import "time"

// LoginRequest is POST /v1/login: sign in to Server. The reply is an NDJSON
// stream of LoginEvent: one "authorize" (the URL to open), then one
// "result" or one "error".
type LoginRequest struct {
	Server    string `json:"server"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// LoginEventType is the type of a line of the login stream.
type LoginEventType string

// Login event types.
const (
	LoginEventAuthorize LoginEventType = "authorize"
	LoginEventResult    LoginEventType = "result"
	LoginEventError     LoginEventType = "error"
)

// LoginEvent is one line of the login stream.
type LoginEvent struct {
	Type   LoginEventType `json:"type"`
	Time   time.Time      `json:"time"`
	URL    string         `json:"url,omitempty"`
	Result *LoginResult   `json:"result,omitempty"`
	Error  *ErrorDetail   `json:"error,omitempty"`
}

// LoginResult is what a sign-in got.
type LoginResult struct {
	Server          string    `json:"server"`
	Scopes          []string  `json:"scopes"`
	Expiry          time.Time `json:"expiry,omitzero"`
	RefreshToken    bool      `json:"refresh_token"`
	ClientID        string    `json:"client_id"`
	ClientSource    string    `json:"client_source"` // configured | metadata_document | registered
	NewRegistration bool      `json:"new_registration"`
	Warnings        []string  `json:"warnings"`
	// NotNeeded: the server answered MCP without a sign-in, and none was
	// made (mcpx login without --force); the other fields are empty.
	NotNeeded bool `json:"not_needed,omitempty"`
	// Connection is how the server's reconnection with the new token
	// went: the sign-in answers once it has finished.
	Connection *LoginConnection `json:"connection,omitempty"`
}

// LoginConnection is the server's state after the reconnection that
// follows a sign-in.
type LoginConnection struct {
	State State  `json:"state"` // ready | degraded | error | disabled
	Tools int    `json:"tools"`
	Error string `json:"error,omitempty"` // why it is not usable
}

// LogoutRequest is POST /v1/logout.
type LogoutRequest struct {
	Server string `json:"server"`
}

// LogoutResult says what a sign-out did.
type LogoutResult struct {
	Server      string `json:"server"`
	Removed     bool   `json:"removed"` // local tokens deleted
	Revoked     bool   `json:"revoked"` // the authorization server confirmed revocation (RFC 7009)
	RevokeError string `json:"revoke_error,omitempty"`
}

// AuthStatus is GET /v1/auth/status: one server's sign-in and refresh state.
type AuthStatus struct {
	Server        string     `json:"server"`
	URL           string     `json:"url"`
	SignedIn      bool       `json:"signed_in"`
	Expiry        *time.Time `json:"expiry,omitempty"`
	RefreshToken  bool       `json:"refresh_token"`
	Scopes        []string   `json:"scopes"`
	LastRefresh   *time.Time `json:"last_refresh,omitempty"`
	LastOutcome   string     `json:"last_outcome,omitempty"`
	LastClass     string     `json:"last_class,omitempty"` // transient | terminal
	LastError     string     `json:"last_error,omitempty"`
	Latched       string     `json:"latched,omitempty"` // a terminal failure: sign in again
	CooldownUntil *time.Time `json:"cooldown_until,omitempty"`
	NextProactive *time.Time `json:"next_proactive_refresh,omitempty"`
	Refreshing    bool       `json:"refreshing"`
	// TokenRequests counts refresh requests sent to the token endpoint
	// since proxyd registered the server (0 when read without the daemon).
	TokenRequests int64 `json:"token_requests"`
	// Grant is how tokens are obtained: authorization_code,
	// client_credentials, jwt_bearer or token_exchange; static for a
	// token set with 'mcpx auth set-token'.
	Grant string `json:"grant"`
	// Binding is how the token is presented: Bearer, or DPoP when it is
	// bound to the grant's key.
	Binding string `json:"binding,omitempty"`
	// IdentitySource is where a jwt_bearer or token_exchange grant reads
	// its identity token: the ${file:...} or ${env:...} reference.
	IdentitySource string `json:"identity_source,omitempty"`
	// Issuer is the authorization server the credentials are keyed by.
	Issuer string `json:"issuer,omitempty"`
}
