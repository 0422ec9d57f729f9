package api

import "time"

// LoginRequest is POST /v1/login: sign in to Server. The reply is an NDJSON
// stream of LoginEvent: one "authorize" (the URL to open), then one
// "result" or one "error".
type LoginRequest struct {
	Server    string `json:"server"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// Login event types.
const (
	LoginEventAuthorize = "authorize"
	LoginEventResult    = "result"
	LoginEventError     = "error"
)

// LoginEvent is one line of the login stream.
type LoginEvent struct {
	Type   string       `json:"type"`
	Time   time.Time    `json:"time"`
	URL    string       `json:"url,omitempty"`
	Result *LoginResult `json:"result,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
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
	// since proxyd registered the server.
	TokenRequests int64 `json:"token_requests"`
}

// RefreshDrillRequest is POST /v1/drill/refresh.
type RefreshDrillRequest struct {
	Server  string `json:"server"`
	Callers int    `json:"callers"`
}

// RefreshDrillEvent is one NDJSON line of the refresh drill's stream.
type RefreshDrillEvent struct {
	Type    string              `json:"type"` // progress | report | error
	Time    time.Time           `json:"time"`
	Message string              `json:"message,omitempty"`
	Report  *RefreshDrillReport `json:"report,omitempty"`
	Error   *ErrorDetail        `json:"error,omitempty"`
}

// RefreshDrillReport is the outcome of `mcpx drill refresh`.
type RefreshDrillReport struct {
	Server        string   `json:"server"`
	Callers       int      `json:"callers"`
	TokenRequests int64    `json:"token_requests"`
	Succeeded     int      `json:"succeeded"`
	Failed        int      `json:"failed"`
	GrantIntact   bool     `json:"grant_intact"`
	P50MS         float64  `json:"p50_ms"`
	P99MS         float64  `json:"p99_ms"`
	Verdict       string   `json:"verdict"`
	Notes         []string `json:"notes"`
}
