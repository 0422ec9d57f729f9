// Package downstream serves the union of the upstreams' tools, prompts and
// resources as one MCP server (Streamable HTTP), the endpoint MCP clients
// connect to.
package downstream

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// CacheTTLMillis is the freshness proxyd gives its own listings: every
// listing depends on the caller, so they are private and short-lived.
const CacheTTLMillis = 5000

// Upstream is what the endpoint needs of one upstream server.
type Upstream struct {
	Name      string
	Prefix    string // goes before tool and prompt names (config: prefix)
	Modern    bool   // speaks the modern (session-less) era
	Tools     []mcp.Tool
	Prompts   []mcp.Prompt
	Resources []mcp.Resource
	Templates []mcp.ResourceTemplate
}

// CallMeta identifies a call for the activity record.
type CallMeta struct {
	Client    string // downstream session id, or "stdio"/"cli"
	RequestID string
}

// Backend is the proxy core as the endpoint sees it.
type Backend interface {
	Upstreams() []Upstream
	CallTool(ctx context.Context, server, tool string, args json.RawMessage, meta CallMeta) (*mcp.CallToolResult, error)
	GetPrompt(ctx context.Context, server string, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error)
	ReadResource(ctx context.Context, server string, req mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error)
}

// UnknownToolRecorder is implemented by backends that record calls to
// tools no upstream offers (exposed is the name the client asked for).
type UnknownToolRecorder interface {
	RecordUnknownTool(ctx context.Context, exposed string, meta CallMeta)
}

// clientOf names the downstream client of a request.
func clientOf(ctx context.Context) string {
	if c, ok := ctx.Value(clientKey{}).(string); ok {
		return c
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		return "session:" + prefix(cs.SessionID())
	}
	return "mcp"
}

// Server is the aggregated MCP server.
type Server struct {
	backend Backend
	mcp     *server.MCPServer
	log     *slog.Logger

	// sessions issues the legacy era's session ids; table routes exposed
	// tool names (both shared with the fast path).
	sessions *sessionIDs
	table    atomic.Pointer[routes]

	mu        sync.Mutex
	toolSig   string
	promptSig string
	resSig    string
	omitted   string // the omissions last logged
}

// New builds the aggregated server; call Sync after upstream changes.
func New(backend Backend, version string, log *slog.Logger) *Server {
	s := &Server{backend: backend, log: log, sessions: newSessionIDs()}
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(false, true),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithCacheHints(CacheTTLMillis, mcp.CacheScopePrivate),
		server.WithInstructions("mcpx proxyd: tools and prompts of each upstream server are named <prefix><name>, the prefix being <server>__ unless configured otherwise."),
	}
	// A call to a tool no upstream offers is refused by the library before
	// any handler runs; it still belongs in the activity log.
	if rr, ok := backend.(UnknownToolRecorder); ok {
		hooks := &server.Hooks{}
		hooks.AddOnError(func(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
			if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
				return
			}
			if req, ok := message.(*mcp.CallToolRequest); ok {
				rr.RecordUnknownTool(ctx, req.Params.Name, CallMeta{Client: clientOf(ctx)})
			}
		})
		opts = append(opts, server.WithHooks(hooks))
	}
	for _, m := range []mcp.MCPMethod{mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList,
		mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead, mcp.MethodServerDiscover} {
		opts = append(opts, server.WithMethodCacheHints(m, CacheTTLMillis, mcp.CacheScopePrivate))
	}
	s.mcp = server.NewMCPServer("mcpx-proxyd", version, opts...)
	return s
}

// MCPServer exposes the underlying server (tests, stdio bridge).
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// Sync publishes the upstreams' current lists. Unchanged lists are left
// alone so clients are not told of changes that did not happen. Upstreams
// come in configuration order, which decides who keeps a name or a
// resource URI that two servers share.
func (s *Server) Sync() {
	ups := s.backend.Upstreams()
	naming := Name(ups)
	var tools []server.ServerTool
	var prompts []server.ServerPrompt
	var resources []server.ServerResource
	var templates []server.ServerResourceTemplate
	var tsig, psig, rsig strings.Builder
	seenURI := map[string]bool{}
	table := routes{}
	for _, u := range ups {
		for _, t := range u.Tools {
			exposed, ok := naming.Tool(u, t.Name)
			if !ok || !exposable(&t) {
				continue
			}
			table[exposed] = route{server: u.Name, tool: t.Name, modern: u.Modern,
				paramHeaders: len(mcp.ExtractParamHeaderBindings(&t)) > 0}
			tool := t
			tool.Name = exposed
			b, _ := json.Marshal(tool)
			tsig.Write(b)
			tools = append(tools, server.ServerTool{Tool: tool, Handler: s.toolHandler(u.Name, t.Name)})
		}
		for _, p := range u.Prompts {
			exposed, ok := naming.Prompt(u, p.Name)
			if !ok {
				continue
			}
			prompt := p
			prompt.Name = exposed
			b, _ := json.Marshal(prompt)
			psig.Write(b)
			prompts = append(prompts, server.ServerPrompt{Prompt: prompt, Handler: s.promptHandler(u.Name, p.Name)})
		}
		for _, r := range u.Resources {
			if seenURI[r.URI] {
				continue // first server wins a URI two servers share
			}
			seenURI[r.URI] = true
			b, _ := json.Marshal(r)
			rsig.Write(b)
			resources = append(resources, server.ServerResource{Resource: r, Handler: s.resourceHandler(u.Name)})
		}
		for _, rt := range u.Templates {
			b, _ := json.Marshal(rt)
			rsig.Write(b)
			server := u.Name
			templates = append(templates, serverTemplate(rt, func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return s.read(ctx, server, req)
			}))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logOmissions(naming.Omitted)
	s.table.Store(&table)
	if sig := tsig.String(); sig != s.toolSig {
		s.toolSig = sig
		s.mcp.SetTools(tools...)
	}
	if sig := psig.String(); sig != s.promptSig {
		s.promptSig = sig
		s.mcp.SetPrompts(prompts...)
	}
	if sig := rsig.String(); sig != s.resSig {
		s.resSig = sig
		s.mcp.SetResources(resources...)
		s.mcp.SetResourceTemplates(templates...)
	}
}

// logOmissions warns of names left out, once per change.
func (s *Server) logOmissions(omitted []Omission) {
	var sig strings.Builder
	for _, o := range omitted {
		sig.WriteString(o.String())
		sig.WriteByte('\n')
	}
	if sig.String() == s.omitted {
		return
	}
	s.omitted = sig.String()
	for _, o := range omitted {
		s.log.Warn("name collision", "server", o.Server, "kind", o.Kind, "name", o.Name, "exposed", o.Exposed, "kept_by", o.Holder)
	}
}

func serverTemplate(rt mcp.ResourceTemplate, read func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error)) server.ServerResourceTemplate {
	return server.ServerResourceTemplate{Template: rt, Handler: read}
}

func (s *Server) toolHandler(srv, tool string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req.Params.Arguments != nil {
			b, err := json.Marshal(req.Params.Arguments)
			if err != nil {
				return nil, fmt.Errorf("encoding arguments: %w", err)
			}
			args = b
		}
		meta := CallMeta{Client: "mcp"}
		if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
			meta.Client = "session:" + prefix(cs.SessionID())
		}
		if c, ok := ctx.Value(clientKey{}).(string); ok {
			meta.Client = c
		}
		return s.backend.CallTool(ctx, srv, tool, args, meta)
	}
}

func (s *Server) promptHandler(srv, name string) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		req.Params.Name = name
		return s.backend.GetPrompt(ctx, srv, req)
	}
}

func (s *Server) resourceHandler(srv string) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return s.read(ctx, srv, req)
	}
}

func (s *Server) read(ctx context.Context, srv string, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	res, err := s.backend.ReadResource(ctx, srv, req)
	if err != nil {
		return nil, err
	}
	return res.Contents, nil
}

func prefix(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

type clientKey struct{}

// Handler is the Streamable HTTP endpoint at /mcp. With a non-empty token
// every request must carry "Authorization: Bearer <token>"; requests with
// a foreign Host or Origin are refused (DNS rebinding).
func (s *Server) Handler(token string, client string) http.Handler {
	opts := []server.StreamableHTTPOption{
		server.WithEndpointPath("/mcp"),
		server.WithSessionIdManager(s.sessions),
	}
	if client != "" {
		opts = append(opts, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, clientKey{}, client)
		}))
	}
	h := server.NewStreamableHTTPServer(s.mcp, opts...)
	return s.guard(h, token, client)
}

func (s *Server) guard(next http.Handler, token, client string) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "forbidden: Host must be a loopback address (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
			http.Error(w, "forbidden: cross-origin request refused", http.StatusForbidden)
			return
		}
		if token != "" {
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcpx", error="invalid_token", error_description="use the token from 'mcpx connect-info'"`)
				http.Error(w, "unauthorized: proxyd needs its bearer token; run 'mcpx connect-info'", http.StatusUnauthorized)
				return
			}
		}
		if s.fastCall(w, r, client) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	if hostport == "" {
		return false
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") || host == "proxyd.sock" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	return loopbackHost(u.Host)
}
