// Package callerr classifies the outcome of every upstream tool call into an
// error class and a fault domain, from the call's result, its error and the
// facts recorded at the HTTP transport for it.
package callerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// Error classes.
const (
	ClassNetwork           = "network"
	ClassTimeout           = "timeout"
	ClassHTTP              = "http"
	ClassJSONRPC           = "jsonrpc"
	ClassToolError         = "tool_error"
	ClassSessionTerminated = "session_terminated"
	ClassAuth              = "auth"
	ClassProxyPolicy       = "proxy_policy"
	ClassProxyInternal     = "proxy_internal"
	ClassCancelled         = "cancelled"
)

// Fault domains.
const (
	DomainUpstream = "upstream"
	DomainProxy    = "proxy"
	DomainClient   = "client"
)

// Classes and Domains are the vocabularies, for validating filters.
var (
	Classes = []string{ClassNetwork, ClassTimeout, ClassHTTP, ClassJSONRPC, ClassToolError,
		ClassSessionTerminated, ClassAuth, ClassProxyPolicy, ClassProxyInternal, ClassCancelled}
	Domains = []string{DomainUpstream, DomainProxy, DomainClient}
)

// Transports, as named in the config.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
	TransportStdio          = "stdio"
)

// PolicyError is a call proxyd refused by its own policy before dispatch:
// a limiter, a disabled server, a size limit.
type PolicyError struct{ Reason string }

func (e *PolicyError) Error() string { return "refused by proxyd: " + e.Reason }

// LimitError is an upstream response that broke one of proxyd's bounds (an
// SSE line or event longer than max_response_bytes, a stream that drips
// without ending a line): proxyd stopped reading it and dropped the
// connection. The upstream is at fault; Limit names the setting.
type LimitError struct {
	Limit  string
	Reason string
}

func (e *LimitError) Error() string { return "the upstream broke a limit: " + e.Reason }

// RefusedError is a call proxyd refused because the request itself is wrong:
// an unknown server or tool, invalid arguments. The client is at fault.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "invalid request: " + e.Reason }

// UnavailableError is a call to a server proxyd is not connected to.
type UnavailableError struct {
	Server string
	Err    error // the connection's last error, if any
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("server %q is not connected: %v", e.Server, e.Err)
	}
	return fmt.Sprintf("server %q is not connected", e.Server)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// AuthError is a call that could not be authorised before or while it was
// sent: no stored token, a failed refresh, a sign-in needed.
type AuthError struct {
	Reason string
	Err    error
}

func (e *AuthError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("authorization: %s: %v", e.Reason, e.Err)
	}
	return "authorization: " + e.Reason
}

func (e *AuthError) Unwrap() error { return e.Err }

// CallerDeadline is the cause of a context whose deadline the caller set
// (mcpx call --timeout) shorter than the server's own call timeout: when
// it passes, the caller gave up before the server's time was up, which
// says nothing of the server.
type CallerDeadline struct {
	After, ServerTimeout time.Duration
}

func (e *CallerDeadline) Error() string {
	return fmt.Sprintf("the caller's deadline of %s passed (the server's call timeout is %s)", e.After, e.ServerTimeout)
}

// InternalError marks a failure inside proxyd itself, for example after a
// good upstream response.
type InternalError struct{ Err error }

func (e *InternalError) Error() string { return "proxyd: " + e.Err.Error() }
func (e *InternalError) Unwrap() error { return e.Err }

// Input is everything known about one finished call.
type Input struct {
	Result *mcp.CallToolResult
	Err    error
	Facts  Facts
	// CallerCtxErr is the downstream caller's context error when the call
	// ended (nil if the caller was still waiting).
	CallerCtxErr error
	// CallerCause is context.Cause of the caller's context: a
	// *CallerDeadline when the caller set a deadline of its own.
	CallerCause error
	// Transport is streamable-http, sse or stdio.
	Transport string
}

// Classification is a call's error class, fault domain, upstream HTTP status
// and a human reason. The zero value means success.
type Classification struct {
	Class      string `json:"error_class,omitempty"`
	Domain     string `json:"fault_domain,omitempty"`
	HTTPStatus int    `json:"upstream_http_status,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// OK reports whether the classification is a success.
func (c Classification) OK() bool { return c.Class == "" }

// Classify applies the ordered rules; the first that matches wins.
func Classify(in Input) Classification {
	if in.Err == nil {
		if in.Result != nil && in.Result.IsError {
			return Classification{Class: ClassToolError, Domain: DomainUpstream, Reason: "the tool returned a result with isError: true"}
		}
		return Classification{}
	}
	for _, r := range rules {
		if c, ok := r(in); ok {
			return c
		}
	}
	return Classification{Class: ClassProxyInternal, Domain: DomainProxy, Reason: "unclassified error inside proxyd"}
}

type rule func(Input) (Classification, bool)

// rules are tried in order. Typed refusals first, then what the transport
// recorded, then error types, then a narrow text fallback.
var rules = []rule{
	callerCancelled,
	typedRefusals,
	limitBroken,
	sessionReestablished,
	sessionTerminated,
	authFailure,
	recordedJSONRPC,
	recordedHTTPStatus,
	recordedInvalidJSON,
	callerDeadline,
	timedOutAsking,
	timedOut,
	proxyCancelled,
	networkFailure,
	jsonRPCSentinel,
	invalidResponse,
	textFallback,
}

func callerCancelled(in Input) (Classification, bool) {
	if errors.Is(in.CallerCtxErr, context.Canceled) {
		return Classification{Class: ClassCancelled, Domain: DomainClient, Reason: "the client cancelled the call"}, true
	}
	return Classification{}, false
}

func typedRefusals(in Input) (Classification, bool) {
	var pe *PolicyError
	if errors.As(in.Err, &pe) {
		if in.Facts.Dispatched {
			// A limit enforced on the response (e.g. its size).
			return Classification{Class: ClassProxyPolicy, Domain: DomainProxy, Reason: "stopped by proxyd policy: " + pe.Reason}, true
		}
		return Classification{Class: ClassProxyPolicy, Domain: DomainProxy, Reason: "refused by proxyd before dispatch: " + pe.Reason}, true
	}
	var re *RefusedError
	if errors.As(in.Err, &re) {
		return Classification{Class: ClassProxyPolicy, Domain: DomainClient, Reason: "invalid request refused before dispatch: " + re.Reason}, true
	}
	var ue *UnavailableError
	if errors.As(in.Err, &ue) {
		return Classification{Class: ClassNetwork, Domain: DomainUpstream, Reason: fmt.Sprintf("server %q is not connected; the call was not sent", ue.Server)}, true
	}
	var ie *InternalError
	if errors.As(in.Err, &ie) {
		return Classification{Class: ClassProxyInternal, Domain: DomainProxy, Reason: "failure inside proxyd"}, true
	}
	var rpc *relay.RPCError
	if errors.As(in.Err, &rpc) && rpc.ByProxy {
		// What the client sent could not be relayed: its own fault,
		// whatever the upstream answered before.
		return Classification{Class: ClassJSONRPC, Domain: DomainClient,
			Reason: fmt.Sprintf("proxyd answered the client's request with JSON-RPC error %d: %s", rpc.Code, rpc.Message)}, true
	}
	return Classification{}, false
}

// limitBroken: the upstream's response broke a bound and was cut off. The
// MCP library may report only that the stream ended, so the transport's
// record counts as much as the error.
func limitBroken(in Input) (Classification, bool) {
	le := in.Facts.Limit
	if le == nil && !errors.As(in.Err, &le) {
		return Classification{}, false
	}
	return Classification{Class: ClassProxyPolicy, Domain: DomainUpstream,
		Reason: "stopped by proxyd: the upstream broke the " + le.Limit + " limit: " + le.Reason}, true
}

// sessionReestablished: proxyd re-established a lost upstream session but
// did not repeat the call (not read-only, or the tool changed). The error
// type lives with the upstream connections, so it is matched by method.
func sessionReestablished(in Input) (Classification, bool) {
	var se interface{ SessionReestablished() bool }
	if !errors.As(in.Err, &se) || !se.SessionReestablished() {
		return Classification{}, false
	}
	c := Classification{Class: ClassSessionTerminated, Domain: DomainUpstream,
		Reason: "the upstream lost the session; proxyd re-established it and did not repeat the call"}
	if st := in.Facts.HTTPStatus; st == http.StatusNotFound || st == http.StatusBadRequest {
		c.HTTPStatus = st
	}
	return c, true
}

func sessionTerminated(in Input) (Classification, bool) {
	if !errors.Is(in.Err, transport.ErrSessionTerminated) {
		return Classification{}, false
	}
	f := in.Facts
	switch {
	case f.HTTPStatus == http.StatusNotFound && !f.SessionLost:
		// No session was presented, so this is not a forgotten session: a
		// wrong endpoint path, or a modern-era server's method-not-found.
		return Classification{Class: ClassHTTP, Domain: DomainUpstream, HTTPStatus: http.StatusNotFound,
			Reason: "HTTP 404 recorded at the transport for a request without a session (wrong endpoint path?)"}, true
	case f.HTTPStatus == http.StatusNotFound:
		return Classification{Class: ClassSessionTerminated, Domain: DomainUpstream, HTTPStatus: http.StatusNotFound,
			Reason: "HTTP 404 for the session id: the upstream forgot the session"}, true
	default:
		return Classification{Class: ClassSessionTerminated, Domain: DomainUpstream,
			Reason: "the upstream session had ended earlier; the call was not sent"}, true
	}
}

func authFailure(in Input) (Classification, bool) {
	st := in.Facts.HTTPStatus
	if st == http.StatusForbidden && in.Facts.InsufficientScope {
		return Classification{Class: ClassAuth, Domain: DomainUpstream, HTTPStatus: st,
			Reason: "HTTP 403 insufficient_scope recorded at the transport: the grant lacks a scope the upstream asks for; 'mcpx login' again requests it (scope step-up)"}, true
	}
	if st == http.StatusUnauthorized || st == http.StatusForbidden {
		return Classification{Class: ClassAuth, Domain: DomainUpstream, HTTPStatus: st,
			Reason: fmt.Sprintf("HTTP %d recorded at the transport: the upstream refused the credentials", st)}, true
	}
	var ae *AuthError
	if errors.As(in.Err, &ae) {
		return Classification{Class: ClassAuth, Domain: DomainUpstream, Reason: "authorization failed: " + ae.Reason}, true
	}
	if errors.Is(in.Err, transport.ErrUnauthorized) || errors.Is(in.Err, transport.ErrAuthorizationRequired) ||
		errors.Is(in.Err, transport.ErrOAuthAuthorizationRequired) {
		return Classification{Class: ClassAuth, Domain: DomainUpstream, Reason: "the upstream requires authorization"}, true
	}
	return Classification{}, false
}

func recordedJSONRPC(in Input) (Classification, bool) {
	f := in.Facts
	if !f.HasJSONRPCCode {
		return Classification{}, false
	}
	c := Classification{Class: ClassJSONRPC, Domain: DomainUpstream,
		Reason: fmt.Sprintf("JSON-RPC error %d recorded at the transport", f.JSONRPCCode)}
	if !is2xx(f.HTTPStatus) {
		c.HTTPStatus = f.HTTPStatus
		c.Reason += fmt.Sprintf(" in an HTTP %d response", f.HTTPStatus)
	}
	return c, true
}

func recordedHTTPStatus(in Input) (Classification, bool) {
	st := in.Facts.HTTPStatus
	if st == 0 || is2xx(st) {
		return Classification{}, false
	}
	reason := fmt.Sprintf("HTTP %d recorded at the transport", st)
	switch {
	case in.Facts.HTMLBody:
		reason += " with an HTML body"
	case in.Facts.ContentType != "":
		reason += " with a " + in.Facts.ContentType + " body"
	}
	return Classification{Class: ClassHTTP, Domain: DomainUpstream, HTTPStatus: st, Reason: reason}, true
}

// recordedInvalidJSON: the whole body arrived, yet decoding it ran out of
// input or hit a syntax error, so the upstream sent malformed JSON.
func recordedInvalidJSON(in Input) (Classification, bool) {
	var syn *json.SyntaxError
	if in.Facts.BodyComplete && is2xx(in.Facts.HTTPStatus) &&
		(errors.Is(in.Err, io.ErrUnexpectedEOF) || errors.Is(in.Err, io.EOF) || errors.As(in.Err, &syn)) {
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream,
			Reason: fmt.Sprintf("the upstream's HTTP %d response was not valid JSON-RPC (malformed JSON body)", in.Facts.HTTPStatus)}, true
	}
	return Classification{}, false
}

// callerDeadline: the caller's own deadline passed while the upstream had
// time left by the server's timeout; the caller's choice, not a fault of
// the server's.
func callerDeadline(in Input) (Classification, bool) {
	var cd *CallerDeadline
	if errors.Is(in.CallerCtxErr, context.DeadlineExceeded) && errors.As(in.CallerCause, &cd) {
		return Classification{Class: ClassTimeout, Domain: DomainClient,
			Reason: fmt.Sprintf("the caller's deadline of %s passed before the upstream answered (the server's call timeout is %s)", cd.After, cd.ServerTimeout)}, true
	}
	return Classification{}, false
}

// timedOutAsking: the call's timeout passed while its client was
// answering the upstream's request for input (a person at a prompt): the
// upstream was waiting for the client, not the other way round.
func timedOutAsking(in Input) (Classification, bool) {
	f := in.Facts
	if (f.Asking > 0 || f.AskTimedOut) && (errors.Is(in.Err, context.DeadlineExceeded) || errors.Is(in.CallerCtxErr, context.DeadlineExceeded)) {
		return Classification{Class: ClassTimeout, Domain: DomainClient,
			Reason: "the call's deadline passed while its client was answering the upstream's request for input (a longer timeout gives it more time)"}, true
	}
	return Classification{}, false
}

func timedOut(in Input) (Classification, bool) {
	var ne net.Error
	if errors.Is(in.Err, context.DeadlineExceeded) || errors.Is(in.CallerCtxErr, context.DeadlineExceeded) ||
		errors.Is(in.Err, os.ErrDeadlineExceeded) || (errors.As(in.Err, &ne) && ne.Timeout()) {
		reason := "no response from the upstream before the deadline"
		if in.Facts.HTTPStatus != 0 {
			reason = "the upstream's response did not complete before the deadline"
		}
		return Classification{Class: ClassTimeout, Domain: DomainUpstream, Reason: reason}, true
	}
	return Classification{}, false
}

func proxyCancelled(in Input) (Classification, bool) {
	if errors.Is(in.Err, context.Canceled) {
		// The caller was still waiting, so proxyd itself ended the call.
		return Classification{Class: ClassCancelled, Domain: DomainProxy, Reason: "proxyd cancelled the call (shutdown or reload)"}, true
	}
	return Classification{}, false
}

func networkFailure(in Input) (Classification, bool) {
	err := in.Err
	var (
		opErr   *net.OpError
		dnsErr  *net.DNSError
		exitErr *exec.ExitError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return network("connection refused by the upstream"), true
	case errors.Is(err, syscall.ECONNRESET):
		return network("connection reset by the upstream"), true
	case errors.Is(err, syscall.EPIPE):
		return network("broken pipe: the upstream closed its end"), true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return network("the connection closed before the response was complete"), true
	case errors.Is(err, transport.ErrTransportClosed), errors.As(err, &exitErr), errors.Is(err, os.ErrClosed):
		return network("the upstream process exited or closed its pipes"), true
	case errors.As(err, &dnsErr):
		return network("the upstream's host name did not resolve"), true
	case errors.As(err, &opErr):
		return network("network error talking to the upstream (" + opErr.Op + ")"), true
	case in.Facts.TransportErr != nil && in.Facts.HTTPStatus == 0:
		return network("the HTTP request to the upstream failed without a response"), true
	}
	return Classification{}, false
}

func network(reason string) Classification {
	return Classification{Class: ClassNetwork, Domain: DomainUpstream, Reason: reason}
}

// ErrWrongID is a reply whose JSON-RPC id is not the request's: whatever it
// answers, it is not this call's result.
var ErrWrongID = errors.New("the upstream replied with another request's JSON-RPC id")

// jsonRPCSentinels are the errors the MCP library makes from standard
// JSON-RPC error codes, and proxyd's own for replies that break JSON-RPC;
// they only ever come from an upstream response.
var jsonRPCSentinels = []error{
	mcp.ErrParseError, mcp.ErrInvalidRequest, mcp.ErrMethodNotFound, mcp.ErrInvalidParams,
	mcp.ErrInternalError, mcp.ErrRequestInterrupted, mcp.ErrResourceNotFound, ErrWrongID,
}

func jsonRPCSentinel(in Input) (Classification, bool) {
	for _, s := range jsonRPCSentinels {
		if errors.Is(in.Err, s) {
			return Classification{Class: ClassJSONRPC, Domain: DomainUpstream, Reason: "JSON-RPC error from the upstream: " + s.Error()}, true
		}
	}
	if mcp.IsHeaderMismatch(in.Err) || mcp.IsMissingRequiredClientCapability(in.Err) {
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream, Reason: "JSON-RPC error from the upstream"}, true
	}
	var uv mcp.UnsupportedProtocolVersionError
	var ue mcp.URLElicitationRequiredError
	if errors.As(in.Err, &uv) || errors.As(in.Err, &ue) {
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream, Reason: "JSON-RPC error from the upstream"}, true
	}
	return Classification{}, false
}

// invalidResponse covers a call that reached the upstream and got an answer
// that was neither a result nor an error the rules above recognise.
func invalidResponse(in Input) (Classification, bool) {
	f := in.Facts
	if !f.Dispatched {
		return Classification{}, false
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(in.Err, &syn) || errors.As(in.Err, &typ) || errors.Is(in.Err, relay.ErrInvalidJSON) ||
		errors.Is(in.Err, relay.ErrBatch) || errors.Is(in.Err, relay.ErrNotMessage) {
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream, HTTPStatus: non2xx(f.HTTPStatus),
			Reason: "the upstream's response was not valid JSON-RPC"}, true
	}
	var te *transport.Error
	isTransport := errors.As(in.Err, &te)
	switch {
	case in.Transport == TransportStdio || in.Transport == TransportSSE:
		if isTransport {
			return Classification{}, false
		}
		// proxyd reads a relayed call's answer itself on every
		// transport and records its code; what comes here is a request
		// the library carried, which keeps only the message of a
		// non-standard code.
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream,
			Reason: "JSON-RPC error from the upstream (code not reported by the MCP library)"}, true
	case is2xx(f.HTTPStatus):
		if isTransport {
			return Classification{Class: ClassJSONRPC, Domain: DomainUpstream,
				Reason: fmt.Sprintf("the upstream's HTTP %d response was not a valid MCP response", f.HTTPStatus)}, true
		}
		return Classification{Class: ClassJSONRPC, Domain: DomainUpstream,
			Reason: "the upstream's result could not be used"}, true
	}
	return Classification{}, false
}

func is2xx(st int) bool { return st >= 200 && st < 300 }

func non2xx(st int) int {
	if st == 0 || is2xx(st) {
		return 0
	}
	return st
}

// fallbackPhrases are matched only when the call never left the proxy or
// got no response, so an upstream's own error text is never reinterpreted.
// The last two are the MCP library's own words on the SSE transport, whose
// responses arrive on a separate stream after the POST was accepted.
var fallbackPhrases = []struct {
	phrase string
	class  string
	reason string
}{
	{"connection refused", ClassNetwork, "connection refused (from the error text)"},
	{"connection reset", ClassNetwork, "connection reset (from the error text)"},
	{"broken pipe", ClassNetwork, "broken pipe (from the error text)"},
	{"no such host", ClassNetwork, "host name did not resolve (from the error text)"},
	{"unexpected eof", ClassNetwork, "connection closed early (from the error text)"},
	{"transport closed", ClassNetwork, "upstream transport closed (from the error text)"},
	{"i/o timeout", ClassTimeout, "I/O timeout (from the error text)"},
	{"client.timeout exceeded", ClassTimeout, "HTTP client timeout (from the error text)"},
	{"context deadline exceeded", ClassTimeout, "deadline exceeded (from the error text)"},
	{"timeout waiting for sse response", ClassTimeout, "no response on the SSE stream before the timeout"},
	{"connection has been closed", ClassNetwork, "the SSE stream closed before the response arrived"},
}

func textFallback(in Input) (Classification, bool) {
	f := in.Facts
	noResponse := !f.Dispatched || f.HTTPStatus == 0 || (in.Transport == TransportSSE && is2xx(f.HTTPStatus))
	if !noResponse {
		return Classification{}, false
	}
	msg := strings.ToLower(in.Err.Error())
	for _, p := range fallbackPhrases {
		if strings.Contains(msg, p.phrase) {
			return Classification{Class: p.class, Domain: DomainUpstream, Reason: p.reason}, true
		}
	}
	return Classification{}, false
}
