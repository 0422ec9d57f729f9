// Package downstream serves the union of the upstreams' tools, prompts and
// resources as one MCP server (Streamable HTTP), the endpoint MCP clients
// connect to.
package downstream

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// CacheTTLMillis is the freshness proxyd gives its own listings: every
// listing depends on the caller, so they are private and short-lived.
const CacheTTLMillis = 5000

// Upstream is what the endpoint needs of one upstream server.
type Upstream struct {
	Name   string
	Prefix string // goes before tool and prompt names (config: prefix)
	Modern bool   // speaks the modern (session-less) era
	// Tools must pass mcp.ValidateParamHeaderAnnotations: the library
	// panics serving one that does not (the upstream connection leaves
	// such tools out when it lists them).
	Tools     []Tool
	Prompts   []mcp.Prompt
	Resources []mcp.Resource
	Templates []mcp.ResourceTemplate
}

// Tool is an upstream tool with what the endpoint needs to know of it,
// worked out once when the upstream lists it: a publish with a
// 10,000-tool upstream took about 180 ms when it worked them out again
// (BenchmarkSyncManyTools), and every state change of any server
// publishes.
type Tool struct {
	mcp.Tool
	// Hash identifies the tool's whole definition: it changes when the
	// definition does, which is how a publish tells a changed list.
	Hash string
	// ParamHeaders: some parameter is annotated with x-mcp-header.
	ParamHeaders bool
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
	asks     asks
	// listeners are the modern clients' subscriptions/listen streams.
	listeners listeners
	// urlElicitations routes the completion of URL elicitations.
	urlElicitations urlElicitations
	// relaying and listening count the relayed requests and listen
	// streams being served (OpenStreams); gets counts the legacy
	// sessions' GET streams.
	relaying, listening, gets atomic.Int64
	// listenDropped counts the notifications dropped for listen streams'
	// clients that did not read them (see relay.Outbox).
	listenDropped atomic.Int64
	// maxStreams bounds the GET and listen streams open at once (0: no
	// bound; see SetStreamLimit).
	maxStreams atomic.Int64
	// subscriptions counts the resource subscriptions the clients hold
	// (see subscriptionBounds).
	subscriptions atomic.Int64

	mu       sync.Mutex
	toolKeys map[string]string // exposed name -> what the library serves under it
	// built: each upstream's tools as the last publish built them (see
	// buildTools); seed hashes their lists.
	built     map[string]*builtTools
	seed      maphash.Seed
	promptSig string
	resSig    string
	omitted   string // the omissions last logged
	// naming is the naming of the last Sync: what the endpoint serves.
	naming atomic.Pointer[Naming]
}

// New builds the aggregated server; call Sync after upstream changes.
func New(backend Backend, version string, log *slog.Logger) *Server {
	s := &Server{backend: backend, log: log, sessions: newSessionIDs(), seed: maphash.MakeSeed()}
	s.listeners.done = make(chan struct{})
	s.sessions.ended = s.endSubscriptions
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithRecovery(),
		server.WithCacheHints(CacheTTLMillis, mcp.CacheScopePrivate),
		server.WithInstructions("mcpx proxyd: tools and prompts of each upstream server are named <prefix><name>, the prefix being <server>__ unless configured otherwise."),
	}
	hooks := s.sessions.counted(&server.Hooks{})
	// A call to a tool no upstream offers is refused by the library before
	// any handler runs; it still belongs in the activity log.
	if rr, ok := backend.(UnknownToolRecorder); ok {
		hooks.AddOnError(func(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
			if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
				return
			}
			if req, ok := message.(*mcp.CallToolRequest); ok {
				rr.RecordUnknownTool(ctx, req.Params.Name, CallMeta{Client: clientOf(ctx)})
			}
		})
	}
	// What a legacy client declared and its log level are the session's,
	// for the requests proxyd relays on it.
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		if sess := s.sessionOf(ctx); sess != nil {
			raw, _ := json.Marshal(req.Params.Capabilities)
			sess.setCaps(relay.ParseCaps(raw))
		}
	})
	hooks.AddAfterSetLevel(func(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
		if sess := s.sessionOf(ctx); sess != nil {
			sess.setLevel(string(req.Params.Level))
		}
		if lv, ok := backend.(LevelSetter); ok {
			lv.SetLevel(string(req.Params.Level))
		}
	})
	opts = append(opts, server.WithHooks(hooks))
	for _, m := range []mcp.MCPMethod{mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList,
		mcp.MethodResourcesTemplatesList, mcp.MethodResourcesRead, mcp.MethodServerDiscover} {
		opts = append(opts, server.WithMethodCacheHints(m, CacheTTLMillis, mcp.CacheScopePrivate))
	}
	s.mcp = server.NewMCPServer("mcpx-proxyd", version, opts...)
	// A legacy client's roots changed: the upstreams that asked it for its
	// roots hear of it (the others never saw them).
	if rn, ok := backend.(RootsNotifier); ok {
		s.mcp.AddNotificationHandler(string(mcp.MethodNotificationRootsListChanged), func(ctx context.Context, _ mcp.JSONRPCNotification) {
			if sess := s.sessionOf(ctx); sess != nil {
				for _, srv := range sess.rootsAskers() {
					go rn.RootsChanged(srv)
				}
			}
		})
	}
	return s
}

// RootsNotifier is implemented by backends that tell an upstream a
// client's roots changed.
type RootsNotifier interface {
	RootsChanged(server string)
}

// LevelSetter is implemented by backends that pass a client's
// logging/setLevel on to the upstreams.
type LevelSetter interface {
	SetLevel(level string)
}

// sessionOf is the legacy session of a request the library handles.
func (s *Server) sessionOf(ctx context.Context) *session {
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		return s.sessions.get(cs.SessionID())
	}
	return nil
}

// Naming is who answers to which exposed name on the endpoint, as of the
// last Sync; reading it costs nothing, however many tools there are.
func (s *Server) Naming() Naming {
	if n := s.naming.Load(); n != nil {
		return *n
	}
	return Naming{}
}

// OpenStreams are the relayed requests and subscriptions/listen streams
// being served now: both fall to zero once their clients have left.
func (s *Server) OpenStreams() (requests, listens int64) {
	return s.relaying.Load(), s.listening.Load()
}

// ListenNotificationsDropped counts the notifications dropped for
// subscriptions/listen clients that did not read them.
func (s *Server) ListenNotificationsDropped() int64 { return s.listenDropped.Load() }

// SetStreamLimit bounds the GET and listen streams open at once. Each holds
// a connection for as long as its client listens, and the connection cap
// never cuts a busy one: proxyd sets this to half its connections, so
// that streams cannot take every connection from requests.
func (s *Server) SetStreamLimit(n int) { s.maxStreams.Store(int64(n)) }

// MCPServer exposes the underlying server (tests, stdio bridge).
func (s *Server) MCPServer() *server.MCPServer { return s.mcp }

// Sync publishes the upstreams' current lists. Unchanged lists are left
// alone so clients are not told of changes that did not happen. Upstreams
// come in configuration order, which decides who keeps a name or a
// resource URI that two servers share.
func (s *Server) Sync() {
	ups := s.backend.Upstreams()
	naming := Name(ups)
	s.naming.Store(&naming)
	var prompts []server.ServerPrompt
	var resources []server.ServerResource
	var templates []server.ServerResourceTemplate
	// To tell a change: each exposed tool's key (its server, name and
	// definition hash), and signatures of the other lists: hashes, not
	// JSON kept (megabytes for an upstream with thousands of tools).
	n := 0
	for _, u := range ups {
		n += len(u.Tools)
	}
	toolKeys := make(map[string]string, n)
	tools := make([]*builtTool, 0, n)
	psig, rsig := sha256.New(), sha256.New()
	table := newRoutes()
	table.tools = make(map[string]route, n)
	s.mu.Lock()
	prev := s.built
	s.mu.Unlock()
	built := make(map[string]*builtTools, len(ups))
	for _, u := range ups {
		bt := s.buildTools(u, prev[u.Name])
		built[u.Name] = bt
		for i := range bt.tools {
			t := &bt.tools[i]
			if naming.Tools[t.exposed] != (Entry{Server: u.Name, Name: t.route.tool}) {
				continue // another server holds the name
			}
			table.tools[t.exposed] = t.route
			toolKeys[t.exposed] = t.key
			tools = append(tools, t)
		}
		for _, p := range u.Prompts {
			exposed, ok := naming.Prompt(u, p.Name)
			if !ok {
				continue
			}
			table.prompts[exposed] = promptRoute{server: u.Name, name: p.Name}
			prompt := p
			prompt.Name = exposed
			b, _ := json.Marshal(prompt)
			psig.Write(b)
			prompts = append(prompts, server.ServerPrompt{Prompt: prompt, Handler: s.promptHandler(u.Name, p.Name)})
		}
		for _, r := range u.Resources {
			if naming.Resources[r.URI] != u.Name {
				continue // the first server keeps a URI two servers list
			}
			table.resources[r.URI] = u.Name
			b, _ := json.Marshal(r)
			rsig.Write(b)
			resources = append(resources, server.ServerResource{Resource: r, Handler: s.resourceHandler(u.Name)})
		}
		for _, rt := range u.Templates {
			if rt.URITemplate != nil && rt.URITemplate.Template != nil {
				table.templates = append(table.templates, templateRoute{server: u.Name, template: rt.URITemplate.Raw(), uri: rt.URITemplate})
			}
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
	s.table.Store(table)
	s.built = built
	s.publishTools(tools, toolKeys)
	if sig := string(psig.Sum(nil)); sig != s.promptSig {
		s.promptSig = sig
		s.mcp.SetPrompts(prompts...)
		s.listChanged(mcp.MethodNotificationPromptsListChanged)
	}
	if sig := string(rsig.Sum(nil)); sig != s.resSig {
		s.resSig = sig
		s.mcp.SetResources(resources...)
		s.mcp.SetResourceTemplates(templates...)
		s.listChanged(mcp.MethodNotificationResourcesListChanged)
	}
}

// builtTools is one upstream's tools made ready to publish, kept from
// one publish to the next while the upstream's list, prefix and era stay
// the same: with a 10,000-tool upstream, building them again on every
// publish (routes, the library's copies, their keys) was most of its
// cost, and any server's change of state publishes.
type builtTools struct {
	sig   uint64
	tools []builtTool
}

type builtTool struct {
	exposed string
	key     string // what the exposed name stands for (see publishTools)
	route   route
	serve   server.ServerTool
}

// buildTools returns u's tools ready to publish: prev when it was built
// from the same list.
func (s *Server) buildTools(u Upstream, prev *builtTools) *builtTools {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(u.Prefix)
	if u.Modern {
		h.WriteByte(1)
	}
	for _, t := range u.Tools {
		h.WriteString(t.Name)
		h.WriteByte(0)
		h.WriteString(t.Hash)
		h.WriteByte(0)
	}
	sig := h.Sum64()
	if prev != nil && prev.sig == sig {
		return prev
	}
	bt := &builtTools{sig: sig, tools: make([]builtTool, len(u.Tools))}
	for i, t := range u.Tools {
		def := t.Tool
		exposed := ExposedName(u.Name, u.Prefix, t.Name)
		tool := t.Tool
		tool.Name = exposed
		bt.tools[i] = builtTool{
			exposed: exposed,
			key:     u.Name + "\x00" + t.Name + "\x00" + t.Hash,
			route:   route{server: u.Name, tool: t.Name, modern: u.Modern, paramHeaders: t.ParamHeaders, def: &def},
			serve:   server.ServerTool{Tool: tool, Handler: s.toolHandler(u.Name, t.Name)},
		}
	}
	return bt
}

// publishTools brings the library's tools to tools (keys: what each
// exposed name stands for), changing only what changed: the library
// checks every tool it is given (about 40 ms for 10,000), and a server
// that comes and goes would otherwise cost that on every publish. One
// change, one list_changed: tools only added or only removed go in one
// call, and a mix (or a changed tool) replaces the whole list.
func (s *Server) publishTools(tools []*builtTool, keys map[string]string) {
	var gone []string
	for name, k := range s.toolKeys {
		if keys[name] != k {
			gone = append(gone, name)
		}
	}
	var added []server.ServerTool
	for _, t := range tools {
		if s.toolKeys[t.exposed] != t.key {
			added = append(added, t.serve)
		}
	}
	switch {
	case len(gone) == 0 && len(added) == 0:
		return
	case len(added) == 0:
		s.mcp.DeleteTools(gone...)
	case len(gone) == 0:
		s.mcp.AddTools(added...)
	default:
		all := make([]server.ServerTool, len(tools))
		for i, t := range tools {
			all[i] = t.serve
		}
		s.mcp.SetTools(all...)
	}
	s.toolKeys = keys
	s.listChanged(mcp.MethodNotificationToolsListChanged)
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
