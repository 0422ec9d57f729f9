package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/retryafter"
)

// Outcome is how a refresh ended: the outcome label of the refresh counter
// and the class logged for every flight.
type Outcome string

// Refresh outcomes.
const (
	OutcomeSuccess                Outcome = "success"
	OutcomeInvalidGrant           Outcome = "failed_invalid_grant"
	OutcomeInvalidClient          Outcome = "failed_invalid_client"
	OutcomeUnauthorizedClient     Outcome = "failed_unauthorized_client"
	OutcomeUnsupportedGrantType   Outcome = "failed_unsupported_grant_type"
	OutcomeInvalidScope           Outcome = "failed_invalid_scope"
	OutcomeServerError            Outcome = "failed_server_error"
	OutcomeTemporarilyUnavailable Outcome = "failed_temporarily_unavailable"
	OutcomeRateLimited            Outcome = "failed_rate_limited"
	OutcomeNetwork                Outcome = "failed_network"
	OutcomeOther                  Outcome = "failed_other"
)

// Outcomes lists every outcome label, for pre-initialising counters.
var Outcomes = []Outcome{OutcomeSuccess, OutcomeInvalidGrant, OutcomeInvalidClient, OutcomeUnauthorizedClient,
	OutcomeUnsupportedGrantType, OutcomeInvalidScope, OutcomeServerError, OutcomeTemporarilyUnavailable,
	OutcomeRateLimited, OutcomeNetwork, OutcomeOther}

// RefreshError is a classified refresh (or code exchange) failure. Its
// Error text is Msg, which never contains a credential; Err is the cause
// for errors.Is/As and must not be printed.
type RefreshError struct {
	Class      Outcome
	Terminal   bool   // retrying cannot help: the user must sign in again or fix config
	Code       string // RFC 6749 §5.2 error code, when the server sent one
	HTTPStatus int
	RetryAfter time.Duration
	Msg        string // redacted, for people
	Err        error
}

func (e *RefreshError) Error() string { return e.Msg }
func (e *RefreshError) Unwrap() error { return e.Err }

// ClassifyRefreshError classifies a token endpoint failure by the RFC 6749
// code and the HTTP status of *oauth2.RetrieveError, then by network error
// types; registered says whether the client came from dynamic
// registration (it only changes the message of invalid_client, the
// coordinator applies the registration rules).
func ClassifyRefreshError(err error, registered bool) *RefreshError {
	if err == nil {
		return nil
	}
	var re *RefreshError
	if errors.As(err, &re) {
		return re
	}
	out := &RefreshError{Class: OutcomeOther, Err: err}
	var rerr *oauth2.RetrieveError
	if errors.As(err, &rerr) {
		out.Code = rerr.ErrorCode
		if rerr.Response != nil {
			out.HTTPStatus = rerr.Response.StatusCode
			out.RetryAfter = retryafter.Parse(rerr.Response.Header.Get("Retry-After"), time.Now())
		}
		if out.Code == "" {
			out.Code = codeFromBody(rerr.Body)
		}
		classifyCode(out)
		out.Msg = refreshMessage(out, registered, redact.Text(rerr.ErrorDescription))
		return out
	}
	switch {
	case isNetwork(err):
		out.Class = OutcomeNetwork
		out.Msg = "token endpoint unreachable: " + networkReason(err)
	default:
		out.Msg = "token refresh failed: " + redact.Text(err.Error())
	}
	return out
}

func classifyCode(out *RefreshError) {
	switch {
	case out.HTTPStatus == http.StatusTooManyRequests || out.Code == "slow_down":
		out.Class = OutcomeRateLimited
	case out.Code == "invalid_grant":
		out.Class, out.Terminal = OutcomeInvalidGrant, true
	case out.Code == "invalid_client":
		out.Class, out.Terminal = OutcomeInvalidClient, true
	case out.Code == "unauthorized_client":
		out.Class, out.Terminal = OutcomeUnauthorizedClient, true
	case out.Code == "unsupported_grant_type":
		out.Class, out.Terminal = OutcomeUnsupportedGrantType, true
	case out.Code == "invalid_scope":
		out.Class, out.Terminal = OutcomeInvalidScope, true
	case out.Code == "temporarily_unavailable":
		out.Class = OutcomeTemporarilyUnavailable
	case out.Code == "server_error" || out.HTTPStatus >= 500:
		out.Class = OutcomeServerError
	default:
		out.Class = OutcomeOther
	}
}

func refreshMessage(e *RefreshError, registered bool, desc string) string {
	var b strings.Builder
	switch e.Class {
	case OutcomeInvalidGrant:
		b.WriteString("the authorization server rejected the grant (invalid_grant): sign in again")
	case OutcomeInvalidClient:
		if registered {
			b.WriteString("the authorization server rejected the client registration (invalid_client): sign in again to register anew")
		} else {
			b.WriteString("the authorization server rejected the configured client (invalid_client): check oauth.client_id and oauth.client_secret")
		}
	case OutcomeUnauthorizedClient:
		b.WriteString("the client may not use the refresh grant (unauthorized_client): sign in again")
	case OutcomeUnsupportedGrantType:
		b.WriteString("the authorization server does not support refresh (unsupported_grant_type): sign in again")
	case OutcomeInvalidScope:
		b.WriteString("the requested scope was refused (invalid_scope): sign in again")
	case OutcomeTemporarilyUnavailable:
		b.WriteString("the authorization server is temporarily unavailable")
	case OutcomeServerError:
		b.WriteString("the authorization server failed")
	case OutcomeRateLimited:
		b.WriteString("the authorization server is rate limiting")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
		}
	default:
		b.WriteString("token refresh failed")
		if e.Code != "" {
			fmt.Fprintf(&b, " (%s)", sanitizeCode(e.Code))
		}
	}
	if e.HTTPStatus != 0 {
		fmt.Fprintf(&b, " [HTTP %d]", e.HTTPStatus)
	}
	if desc != "" {
		b.WriteString(": ")
		b.WriteString(desc)
	}
	return b.String()
}

// sanitizeCode keeps an error code printable and short.
func sanitizeCode(c string) string {
	c = strings.Join(strings.Fields(redact.Control(c)), " ")
	if len(c) > 64 {
		c = c[:64]
	}
	return c
}

// codeFromBody finds an RFC 6749 code in a JSON body the oauth2 package
// did not decode (for example a JSON error served as text/html).
func codeFromBody(body []byte) string {
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil {
		return v.Error
	}
	return ""
}

func isNetwork(err error) bool {
	var ne net.Error
	var ue *url.Error
	var oe *net.OpError
	var errno syscall.Errno
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &ne) || errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &errno)
}

func networkReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return "name did not resolve"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return redact.Text(oe.Err.Error())
	}
	return "network error"
}
