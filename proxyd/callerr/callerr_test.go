package callerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// wrapTransport spells an error the way the MCP client returns a failed send.
func wrapTransport(err error) error {
	return transport.NewError(fmt.Errorf("failed to send request: %w", err))
}

func TestClassify(t *testing.T) {
	sent := Facts{Dispatched: true, Requests: 1}
	withStatus := func(st int, ct string) Facts {
		return Facts{Dispatched: true, Requests: 1, HTTPStatus: st, ContentType: ct}
	}
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EHOSTUNREACH}}

	tests := []struct {
		name       string
		in         Input
		class      string
		domain     string
		status     int
		reasonHint string
	}{
		{name: "success", in: Input{Result: &mcp.CallToolResult{}, Facts: withStatus(200, "application/json")}},
		{name: "success without result", in: Input{}},
		{name: "isError result", in: Input{Result: &mcp.CallToolResult{IsError: true}, Facts: withStatus(200, "application/json")},
			class: ClassToolError, domain: DomainUpstream, reasonHint: "isError"},
		{name: "caller cancelled", in: Input{Err: wrapTransport(context.Canceled), CallerCtxErr: context.Canceled, Facts: sent},
			class: ClassCancelled, domain: DomainClient},
		{name: "caller cancelled wins over recorded 502", in: Input{Err: errors.New("x"), CallerCtxErr: context.Canceled, Facts: withStatus(502, "text/html")},
			class: ClassCancelled, domain: DomainClient},
		{name: "policy refusal", in: Input{Err: fmt.Errorf("call: %w", &PolicyError{Reason: "rate limit"})},
			class: ClassProxyPolicy, domain: DomainProxy, reasonHint: "rate limit"},
		{name: "reply with another id", in: Input{Err: fmt.Errorf("%w (sent id 1, got 2)", ErrWrongID), Facts: withStatus(200, "application/json")},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "id"},
		{name: "limit broken, recorded at the transport", in: Input{Err: errors.New("unexpected nil response"),
			Facts: Facts{Dispatched: true, HTTPStatus: 200, Limit: &LimitError{Limit: "max_response_bytes", Reason: "an event-stream line longer than max_response_bytes"}}},
			class: ClassProxyPolicy, domain: DomainUpstream, reasonHint: "max_response_bytes"},
		{name: "limit broken, in the error", in: Input{Err: fmt.Errorf("call: %w", &LimitError{Limit: "stream_idle_timeout", Reason: "drip"})},
			class: ClassProxyPolicy, domain: DomainUpstream, reasonHint: "stream_idle_timeout"},
		{name: "refused request", in: Input{Err: &RefusedError{Reason: `unknown tool "nope"`}},
			class: ClassProxyPolicy, domain: DomainClient, reasonHint: "unknown tool"},
		{name: "server not connected", in: Input{Err: &UnavailableError{Server: "docs", Err: syscall.ECONNREFUSED}},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "not connected"},
		{name: "internal", in: Input{Err: &InternalError{Err: errors.New("encode")}, Facts: withStatus(200, "application/json")},
			class: ClassProxyInternal, domain: DomainProxy},
		{name: "404 on session", in: Input{Err: wrapTransport(transport.ErrSessionTerminated),
			Facts: Facts{Dispatched: true, HTTPStatus: 404, SessionLost: true}},
			class: ClassSessionTerminated, domain: DomainUpstream, status: 404},
		{name: "session ended earlier, not sent", in: Input{Err: wrapTransport(transport.ErrSessionTerminated)},
			class: ClassSessionTerminated, domain: DomainUpstream},
		{name: "404 without session", in: Input{Err: wrapTransport(transport.ErrSessionTerminated), Facts: withStatus(404, "text/plain")},
			class: ClassHTTP, domain: DomainUpstream, status: 404, reasonHint: "without a session"},
		{name: "401", in: Input{Err: wrapTransport(&transport.AuthorizationRequiredError{}), Facts: withStatus(401, "")},
			class: ClassAuth, domain: DomainUpstream, status: 401},
		{name: "403", in: Input{Err: errors.New("request failed with status 403: forbidden"), Facts: withStatus(403, "text/plain")},
			class: ClassAuth, domain: DomainUpstream, status: 403},
		{name: "403 insufficient_scope", in: Input{Err: errors.New("request failed with status 403: forbidden"), Facts: func() Facts {
			f := withStatus(403, "text/plain")
			f.InsufficientScope = true
			return f
		}()}, class: ClassAuth, domain: DomainUpstream, status: 403, reasonHint: "scope step-up"},
		{name: "auth required before dispatch", in: Input{Err: &AuthError{Reason: "sign in with mcpx login docs"}},
			class: ClassAuth, domain: DomainUpstream, reasonHint: "sign in"},
		{name: "library authorization error", in: Input{Err: wrapTransport(transport.ErrOAuthAuthorizationRequired)},
			class: ClassAuth, domain: DomainUpstream},
		{name: "non-standard JSON-RPC code recorded", in: Input{Err: errors.New("custom failure"),
			Facts: Facts{Dispatched: true, HTTPStatus: 200, ContentType: "application/json", JSONRPCCode: -32099, HasJSONRPCCode: true}},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "-32099"},
		{name: "JSON-RPC code under 502", in: Input{Err: mcp.ErrInternalError,
			Facts: Facts{Dispatched: true, HTTPStatus: 502, ContentType: "application/json", JSONRPCCode: -32603, HasJSONRPCCode: true}},
			class: ClassJSONRPC, domain: DomainUpstream, status: 502, reasonHint: "HTTP 502"},
		{name: "502 HTML", in: Input{Err: wrapTransport(errors.New("request failed with status 502: <html>")),
			Facts: Facts{Dispatched: true, HTTPStatus: 502, ContentType: "text/html", HTMLBody: true}},
			class: ClassHTTP, domain: DomainUpstream, status: 502, reasonHint: "HTML"},
		{name: "429", in: Input{Err: wrapTransport(errors.New("request failed with status 429")), Facts: withStatus(429, "text/plain")},
			class: ClassHTTP, domain: DomainUpstream, status: 429},
		{name: "503 JSON body", in: Input{Err: wrapTransport(errors.New("request failed with status 503: {}")), Facts: withStatus(503, "application/json")},
			class: ClassHTTP, domain: DomainUpstream, status: 503},
		{name: "500", in: Input{Err: wrapTransport(errors.New("request failed with status 500")), Facts: withStatus(500, "")},
			class: ClassHTTP, domain: DomainUpstream, status: 500},
		{name: "deadline", in: Input{Err: wrapTransport(context.DeadlineExceeded), Facts: sent},
			class: ClassTimeout, domain: DomainUpstream},
		{name: "caller deadline", in: Input{Err: errors.New("gave up"), CallerCtxErr: context.DeadlineExceeded, Facts: sent},
			class: ClassTimeout, domain: DomainUpstream},
		{name: "caller's own deadline, shorter than the server's", in: Input{Err: wrapTransport(context.DeadlineExceeded), CallerCtxErr: context.DeadlineExceeded,
			CallerCause: &CallerDeadline{After: time.Second, ServerTimeout: time.Minute}, Facts: sent},
			class: ClassTimeout, domain: DomainClient},
		{name: "caller's own deadline but a status recorded first", in: Input{Err: wrapTransport(errors.New("request failed with status 500")), CallerCtxErr: context.DeadlineExceeded,
			CallerCause: &CallerDeadline{After: time.Second, ServerTimeout: time.Minute}, Facts: withStatus(500, "")},
			class: ClassHTTP, domain: DomainUpstream, status: 500},
		{name: "deadline while the client answers a request for input", in: Input{Err: wrapTransport(context.DeadlineExceeded), Facts: Facts{Dispatched: true, Asking: 1}},
			class: ClassTimeout, domain: DomainClient, reasonHint: "request for input"},
		{name: "deadline that ended the client's answer", in: Input{Err: fmt.Errorf("the client's answer to elicitation/create: %w", context.DeadlineExceeded), Facts: Facts{Dispatched: true, AskTimedOut: true}},
			class: ClassTimeout, domain: DomainClient, reasonHint: "request for input"},
		{name: "deadline after the client answered", in: Input{Err: wrapTransport(context.DeadlineExceeded), Facts: Facts{Dispatched: true, HTTPStatus: 200}},
			class: ClassTimeout, domain: DomainUpstream},
		{name: "net timeout", in: Input{Err: wrapTransport(&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}), Facts: sent},
			class: ClassTimeout, domain: DomainUpstream},
		{name: "cancelled by proxyd", in: Input{Err: wrapTransport(context.Canceled), Facts: sent},
			class: ClassCancelled, domain: DomainProxy},
		{name: "refused", in: Input{Err: wrapTransport(syscall.ECONNREFUSED), Facts: Facts{Dispatched: true, TransportErr: syscall.ECONNREFUSED}},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "refused"},
		{name: "reset", in: Input{Err: wrapTransport(&net.OpError{Op: "read", Err: syscall.ECONNRESET}), Facts: withStatus(200, "application/json")},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "reset"},
		{name: "broken pipe (stdio)", in: Input{Err: wrapTransport(fmt.Errorf("failed to write request: %w", &os.PathError{Op: "write", Err: syscall.EPIPE})), Facts: sent, Transport: TransportStdio},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "pipe"},
		{name: "unexpected EOF", in: Input{Err: wrapTransport(io.ErrUnexpectedEOF), Facts: withStatus(200, "text/event-stream")},
			class: ClassNetwork, domain: DomainUpstream},
		{name: "stdio process exited", in: Input{Err: wrapTransport(transport.ErrTransportClosed), Facts: sent, Transport: TransportStdio},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "exited"},
		{name: "dns", in: Input{Err: wrapTransport(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), Facts: sent},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "resolve"},
		{name: "net.OpError", in: Input{Err: wrapTransport(opErr), Facts: sent},
			class: ClassNetwork, domain: DomainUpstream},
		{name: "transport error without response", in: Input{Err: wrapTransport(errors.New("tls: bad record")), Facts: Facts{Dispatched: true, TransportErr: errors.New("tls")}},
			class: ClassNetwork, domain: DomainUpstream},
		{name: "standard JSON-RPC sentinel", in: Input{Err: fmt.Errorf("%w: no such tool", mcp.ErrMethodNotFound), Facts: sent, Transport: TransportStdio},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "method not found"},
		{name: "invalid params sentinel", in: Input{Err: mcp.ErrInvalidParams, Facts: withStatus(200, "text/event-stream")},
			class: ClassJSONRPC, domain: DomainUpstream},
		{name: "the upstream's JSON-RPC error over stdio", in: Input{Err: &relay.RPCError{Code: -32050, Message: "custom"}, Facts: Facts{Dispatched: true, JSONRPCCode: -32050, HasJSONRPCCode: true}, Transport: TransportStdio},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "-32050 recorded"},
		{name: "proxyd's answer to a retry it cannot match", in: Input{Err: &relay.RPCError{Code: -32602, Message: "requestState is unknown", ByProxy: true}, Facts: withStatus(200, "application/json")},
			class: ClassJSONRPC, domain: DomainClient, reasonHint: "requestState is unknown"},
		{name: "proxyd's answer to a client without the capability, stdio", in: Input{Err: &relay.RPCError{Code: -32021, Message: "missing required client capability", ByProxy: true}, Facts: sent, Transport: TransportStdio},
			class: ClassJSONRPC, domain: DomainClient, reasonHint: "missing required client capability"},
		{name: "stdio non-standard code", in: Input{Err: errors.New("custom failure"), Facts: sent, Transport: TransportStdio},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "code not reported"},
		{name: "malformed JSON body", in: Input{Err: wrapTransport(fmt.Errorf("failed to decode response: %w", &json.SyntaxError{})), Facts: withStatus(200, "application/json")},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "not valid JSON-RPC"},
		{name: "no JSON-RPC message in the body", in: Input{Err: fmt.Errorf("failed to decode response: the upstream sent %w", relay.ErrNotMessage), Facts: withStatus(200, "application/json")},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "not valid JSON-RPC"},
		{name: "batch in the body", in: Input{Err: fmt.Errorf("failed to decode response: the upstream sent %w", relay.ErrBatch), Facts: withStatus(200, "application/json")},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "not valid JSON-RPC"},
		{name: "truncated JSON body recorded", in: Input{Err: wrapTransport(fmt.Errorf("failed to decode response: %w", io.ErrUnexpectedEOF)),
			Facts: Facts{Dispatched: true, HTTPStatus: 200, ContentType: "application/json", BodyComplete: true}},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "malformed"},
		{name: "unexpected content type", in: Input{Err: wrapTransport(errors.New("unexpected content type: text/plain")), Facts: withStatus(200, "text/plain")},
			class: ClassJSONRPC, domain: DomainUpstream, reasonHint: "not a valid MCP response"},
		{name: "text fallback before dispatch", in: Input{Err: errors.New("dial unix: connection refused")},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "error text"},
		{name: "text fallback not used after a response", in: Input{Err: errors.New("upstream says: connection refused"), Facts: withStatus(200, "application/json"), Transport: TransportStreamableHTTP},
			class: ClassJSONRPC, domain: DomainUpstream},
		{name: "sse response never arrived", in: Input{Err: wrapTransport(errors.New("timeout waiting for SSE response after 1m0s")), Facts: withStatus(202, ""), Transport: TransportSSE},
			class: ClassTimeout, domain: DomainUpstream, reasonHint: "SSE"},
		{name: "sse stream closed", in: Input{Err: wrapTransport(errors.New("connection has been closed")), Facts: withStatus(202, ""), Transport: TransportSSE},
			class: ClassNetwork, domain: DomainUpstream, reasonHint: "SSE"},
		{name: "sse non-standard JSON-RPC code", in: Input{Err: errors.New("custom failure"), Facts: withStatus(202, ""), Transport: TransportSSE},
			class: ClassJSONRPC, domain: DomainUpstream},
		{name: "anything else", in: Input{Err: errors.New("surprise")},
			class: ClassProxyInternal, domain: DomainProxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.in)
			if got.Class != tt.class || got.Domain != tt.domain || got.HTTPStatus != tt.status {
				t.Fatalf("Classify = %+v, want %s/%s/%d", got, tt.class, tt.domain, tt.status)
			}
			if tt.class != "" && got.Reason == "" {
				t.Errorf("no reason")
			}
			if !strings.Contains(got.Reason, tt.reasonHint) {
				t.Errorf("reason %q lacks %q", got.Reason, tt.reasonHint)
			}
		})
	}
}

func TestClassifyVocabulary(t *testing.T) {
	for _, c := range []string{ClassNetwork, ClassTimeout, ClassHTTP, ClassJSONRPC, ClassToolError, ClassSessionTerminated,
		ClassAuth, ClassProxyPolicy, ClassProxyInternal, ClassCancelled} {
		if !slices.Contains(Classes, c) {
			t.Errorf("Classes lacks %q", c)
		}
	}
	if len(Classes) != 10 || len(Domains) != 3 {
		t.Errorf("vocabulary sizes %d/%d", len(Classes), len(Domains))
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("connection refused", 502, true, false, -32099, true, "stdio")
	f.Add("session terminated", 404, true, true, 0, false, "streamable-http")
	f.Fuzz(func(t *testing.T, msg string, status int, dispatched, sessionLost bool, code int, hasCode bool, tr string) {
		in := Input{Err: errors.New(msg), Transport: tr,
			Facts: Facts{Dispatched: dispatched, HTTPStatus: status, SessionLost: sessionLost, JSONRPCCode: code, HasJSONRPCCode: hasCode}}
		got := Classify(in)
		if !slices.Contains(Classes, got.Class) || !slices.Contains(Domains, got.Domain) {
			t.Fatalf("outside the vocabulary: %+v", got)
		}
		if got.Reason == "" {
			t.Fatalf("no reason: %+v", got)
		}
		if got.HTTPStatus != 0 && (got.HTTPStatus != status || is2xx(status)) {
			t.Fatalf("status %d reported for recorded %d", got.HTTPStatus, status)
		}
	})
}
