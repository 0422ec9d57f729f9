package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys: the OpenTelemetry MCP semantic conventions, then mcpx's own.
const (
	AttrMethod          = "mcp.method.name"
	AttrProtocolVersion = "mcp.protocol.version"
	AttrSessionID       = "mcp.session.id"
	AttrResourceURI     = "mcp.resource.uri"
	AttrToolName        = "gen_ai.tool.name"
	AttrPromptName      = "gen_ai.prompt.name"
	AttrOperationName   = "gen_ai.operation.name"
	AttrRequestID       = "jsonrpc.request.id"
	AttrErrorType       = "error.type"
	AttrServerAddress   = "server.address"
	AttrServerPort      = "server.port"
	AttrNetTransport    = "network.transport"
	AttrHTTPStatus      = "http.response.status_code"

	AttrErrorClass  = "mcpx.error_class"
	AttrFaultDomain = "mcpx.fault_domain"
	AttrServer      = "mcpx.server"
	AttrMCPXRequest = "mcpx.request_id"
)

// Span events.
const (
	EventReinit  = "mcpx.session.reinitialized"
	EventRetried = "mcpx.call.retried"
	EventRefresh = "mcpx.oauth.token_refreshed"
)

const methodToolsCall = "tools/call"

// maxPeek is the largest request body the endpoint wrapper reads for its
// span; larger ones pass through with the HTTP headers' context only.
const maxPeek = 1 << 20

type serverSpanKey struct{}

// Handler wraps the downstream MCP endpoint: each JSON-RPC request gets a
// server span, continuing the client's trace from params._meta
// (traceparent, tracestate) or else the HTTP headers. Without tracing it
// returns next itself.
func (t *Telemetry) Handler(next http.Handler) http.Handler {
	if !t.Tracing() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		peek, err := io.ReadAll(io.LimitReader(r.Body, maxPeek+1))
		if err != nil {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(peek), r.Body), r.Body}
			next.ServeHTTP(w, r)
			return
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(peek), r.Body), r.Body}
		var msg rpcMessage
		if len(peek) > maxPeek || json.Unmarshal(peek, &msg) != nil || msg.Method == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		if msg.Params.Meta.Traceparent != "" {
			ctx = t.prop.Extract(r.Context(), propagation.MapCarrier{
				"traceparent": msg.Params.Meta.Traceparent, "tracestate": msg.Params.Meta.Tracestate})
		}
		attrs := []attribute.KeyValue{attribute.String(AttrMethod, msg.Method), attribute.String(AttrNetTransport, "tcp")}
		if v := protocolVersion(r, &msg); v != "" {
			attrs = append(attrs, attribute.String(AttrProtocolVersion, v))
		}
		if v := r.Header.Get("Mcp-Session-Id"); v != "" {
			attrs = append(attrs, attribute.String(AttrSessionID, v))
		}
		if len(msg.ID) > 0 {
			attrs = append(attrs, attribute.String(AttrRequestID, string(bytes.Trim(msg.ID, `"`))))
		}
		attrs = append(attrs, targetAttrs(msg.Method, msg.Params.Name, msg.Params.URI)...)
		ctx, span := t.tracer.Start(ctx, spanName(msg.Method, msg.Params.Name), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, serverSpanKey{}, span)))
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// rpcMessage is what a span needs of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name            string `json:"name"`
		URI             string `json:"uri"`
		ProtocolVersion string `json:"protocolVersion"`
		Meta            struct {
			Traceparent     string `json:"traceparent"`
			Tracestate      string `json:"tracestate"`
			ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

func protocolVersion(r *http.Request, m *rpcMessage) string {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	if m.Params.Meta.ProtocolVersion != "" {
		return m.Params.Meta.ProtocolVersion
	}
	return m.Params.ProtocolVersion // initialize
}

// spanName is "{mcp.method.name} {target}" where the method has a
// low-cardinality target (a tool or prompt name).
func spanName(method, name string) string {
	switch method {
	case methodToolsCall, "prompts/get":
		if name != "" {
			return method + " " + name
		}
	}
	return method
}

func targetAttrs(method, name, uri string) []attribute.KeyValue {
	switch {
	case method == methodToolsCall && name != "":
		return []attribute.KeyValue{attribute.String(AttrToolName, name), attribute.String(AttrOperationName, "execute_tool")}
	case method == "prompts/get" && name != "":
		return []attribute.KeyValue{attribute.String(AttrPromptName, name)}
	case uri != "":
		return []attribute.KeyValue{attribute.String(AttrResourceURI, uri)}
	}
	return nil
}

// Extract continues a trace whose context arrived in HTTP headers (the
// CLI's calls over the socket).
func (t *Telemetry) Extract(ctx context.Context, h http.Header) context.Context {
	if !t.Tracing() {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Transport wraps an upstream HTTP transport so every request carries the
// current trace context in its headers. Without tracing it returns next.
func (t *Telemetry) Transport(next http.RoundTripper) http.RoundTripper {
	if !t.Tracing() {
		return next
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if !trace.SpanContextFromContext(req.Context()).IsValid() {
			return next.RoundTrip(req)
		}
		out := req.Clone(req.Context())
		t.prop.Inject(out.Context(), propagation.HeaderCarrier(out.Header))
		return next.RoundTrip(out)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Call instruments one tools/call through proxyd's call funnel: the
// server side (the downstream request's span, or a span of its own for
// calls from the CLI and drills), the upstream client span, and both
// operation-duration histograms.
type Call struct {
	t            *Telemetry
	server, tool string
	start        time.Time
	span         trace.Span // the server-side span; nil without tracing
	own          bool       // span started here, ended by End
	upStart      time.Time
	upEnd        time.Time
	up           trace.Span
	upVersion    string
}

// StartCall begins instrumenting a call of tool on server.
func (t *Telemetry) StartCall(ctx context.Context, server, tool, requestID string) (context.Context, Call) {
	c := Call{t: t, server: server, tool: tool, start: now()}
	if !t.Tracing() {
		return ctx, c
	}
	if s, ok := ctx.Value(serverSpanKey{}).(trace.Span); ok {
		c.span = s
		s.SetAttributes(attribute.String(AttrServer, server), attribute.String(AttrMCPXRequest, requestID))
		return ctx, c
	}
	ctx, c.span = t.tracer.Start(ctx, spanName(methodToolsCall, tool), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(append(targetAttrs(methodToolsCall, tool, ""), attribute.String(AttrMethod, methodToolsCall),
			attribute.String(AttrNetTransport, "unix"), attribute.String(AttrServer, server),
			attribute.String(AttrMCPXRequest, requestID))...))
	c.own = true
	return ctx, c
}

// Tracing reports whether this call is traced.
func (c *Call) Tracing() bool { return c.span != nil }

// StartUpstream marks the request leaving for the upstream at target (its
// URL, or the command of a stdio server) speaking protocol version.
func (c *Call) StartUpstream(ctx context.Context, target, version string) context.Context {
	c.upStart = now()
	c.upVersion = version
	if c.span == nil {
		return ctx
	}
	attrs := append(targetAttrs(methodToolsCall, c.tool, ""), attribute.String(AttrMethod, methodToolsCall),
		attribute.String(AttrServer, c.server))
	if version != "" {
		attrs = append(attrs, attribute.String(AttrProtocolVersion, version))
	}
	attrs = append(attrs, peerAttrs(target)...)
	ctx, c.up = c.t.tracer.Start(ctx, spanName(methodToolsCall, c.tool), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// EndUpstream marks the upstream's answer (or failure) arriving.
func (c *Call) EndUpstream() { c.upEnd = now() }

// PropagationMeta is the trace context to carry in the upstream request's
// params._meta, or nil without tracing.
func (c *Call) PropagationMeta(ctx context.Context) map[string]string {
	if c.up == nil {
		return nil
	}
	m := propagation.MapCarrier{}
	c.t.prop.Inject(ctx, m)
	return m
}

func peerAttrs(target string) []attribute.KeyValue {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return []attribute.KeyValue{attribute.String(AttrNetTransport, "pipe")}
	}
	out := []attribute.KeyValue{attribute.String(AttrNetTransport, "tcp"), attribute.String(AttrServerAddress, u.Hostname())}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	if p, err := strconv.Atoi(port); err == nil {
		out = append(out, attribute.Int(AttrServerPort, p))
	}
	return out
}

// Outcome is how a call ended.
type Outcome struct {
	Class, Domain string // empty class: success
	HTTPStatus    int
	Message       string // redacted
	Reinit        bool
	Retried       bool
	TokenRefresh  bool
}

// End records the call's durations and finishes its spans.
func (c *Call) End(o Outcome) {
	if c.t == nil {
		return
	}
	end := now()
	sets := c.t.attrSets(c.server, c.tool, o.Class, c.upVersion)
	c.t.serverDur.Record(context.Background(), end.Sub(c.start).Seconds(), metric.WithAttributeSet(sets.server))
	if !c.upStart.IsZero() {
		upEnd := c.upEnd
		if upEnd.IsZero() {
			upEnd = end
		}
		c.t.clientDur.Record(context.Background(), upEnd.Sub(c.upStart).Seconds(), metric.WithAttributeSet(sets.client))
	}
	if c.span == nil {
		return
	}
	for _, s := range []trace.Span{c.span, c.up} {
		if s == nil {
			continue
		}
		if o.Class != "" {
			s.SetAttributes(attribute.String(AttrErrorType, o.Class), attribute.String(AttrErrorClass, o.Class),
				attribute.String(AttrFaultDomain, o.Domain))
			s.SetStatus(codes.Error, o.Message)
		}
		if o.HTTPStatus != 0 {
			s.SetAttributes(attribute.Int(AttrHTTPStatus, o.HTTPStatus))
		}
	}
	ev := c.span
	if c.up != nil {
		ev = c.up
	}
	if o.Reinit {
		ev.AddEvent(EventReinit)
	}
	if o.Retried {
		ev.AddEvent(EventRetried)
	}
	if o.TokenRefresh {
		ev.AddEvent(EventRefresh)
	}
	if c.up != nil {
		upEnd := c.upEnd
		if upEnd.IsZero() {
			upEnd = end
		}
		c.up.End(trace.WithTimestamp(upEnd))
	}
	if c.own {
		c.span.End(trace.WithTimestamp(end))
	}
}

// maxSets bounds the metric series a client can create.
const maxSets = 4096

type setKey struct{ server, tool, class, version string }

type setPair struct{ server, client attribute.Set }

// attrSets returns the metric attributes of a call, built once per
// combination: building and sorting a set per call would be most of the
// recording's cost.
func (t *Telemetry) attrSets(server, tool, class, version string) *setPair {
	k := setKey{server, tool, class, version}
	if v, ok := t.sets.Load(k); ok {
		return v.(*setPair)
	}
	// Tool names can come from clients (a call to a tool nobody offers):
	// past a bound, new names share one series.
	if t.nsets.Add(1) > maxSets {
		k.tool, tool = "", ""
		if v, ok := t.sets.Load(k); ok {
			return v.(*setPair)
		}
	}
	attrs := []attribute.KeyValue{attribute.String(AttrMethod, methodToolsCall), attribute.String(AttrToolName, tool), attribute.String(AttrServer, server)}
	if class != "" {
		attrs = append(attrs, attribute.String(AttrErrorType, class))
	}
	p := &setPair{server: attribute.NewSet(attrs...)}
	if version != "" {
		attrs = append(attrs, attribute.String(AttrProtocolVersion, version))
	}
	p.client = attribute.NewSet(attrs...)
	v, _ := t.sets.LoadOrStore(k, p)
	return v.(*setPair)
}

// WithTraceMeta is the JSON object meta (a client's params._meta, or
// empty) with fields (this call's trace context) set over any the client
// sent: the upstream continues proxyd's span, not the client's.
func WithTraceMeta(meta json.RawMessage, fields map[string]string) json.RawMessage {
	if len(fields) == 0 {
		return meta
	}
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(meta)) > 0 && json.Unmarshal(meta, &obj) != nil {
		return meta // not an object: leave it as the client sent it
	}
	for k, v := range fields {
		b, _ := json.Marshal(v)
		obj[k] = b
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return meta
	}
	return out
}
