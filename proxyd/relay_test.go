package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/activity"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// relayUpstream is an MCP server (the MCP library's, on loopback) with one
// tool per relayed feature: progress and log messages, elicitation and
// sampling asked the modern way (the library performs the old requests for
// a legacy client), a call that waits to be cancelled, a prompt with a
// completion, a resource and a template.
type relayUpstream struct {
	url       string
	mu        sync.Mutex
	started   int
	cancelled int
	// gate holds the gated tool after its progress notification until the
	// test closes it.
	gate chan struct{}
	// rootsAsked and rootsChanged are the upstream sessions that asked
	// for roots and that heard notifications/roots/list_changed.
	rootsAsked, rootsChanged []string
}

func (u *relayUpstream) sessions() (asked, changed []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.rootsAsked...), append([]string(nil), u.rootsChanged...)
}

func (u *relayUpstream) cancels() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cancelled
}

func (u *relayUpstream) slowStarted() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.started
}

func startRelayUpstream(t *testing.T) *relayUpstream {
	t.Helper()
	u := &relayUpstream{}
	s := server.NewMCPServer("relay-upstream", "1.0.0",
		server.WithToolCapabilities(false), server.WithLogging(), server.WithRoots(), server.WithPromptCapabilities(false),
		server.WithResourceCapabilities(true, false), server.WithCompletions(),
		server.WithPromptCompletionProvider(nameCompletions{}))
	s.AddTool(mcp.NewTool("progress", mcp.WithReadOnlyHintAnnotation(true)), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv := server.ServerFromContext(ctx)
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			for i := 1; i <= 2; i++ {
				_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": 2})
			}
		}
		_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "relay-upstream", "working"))
		// The library's server drops a notification its stream writer has
		// taken but not written when the handler returns at that moment;
		// a tool that works a little after its last notification is what
		// real tools look like and keeps that race out of this test.
		time.Sleep(20 * time.Millisecond)
		return mcp.NewToolResultText("done"), nil
	})
	s.AddTool(mcp.NewTool("gated", mcp.WithReadOnlyHintAnnotation(true)), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.mu.Lock()
		gate := u.gate
		u.mu.Unlock()
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 2})
		}
		select {
		case <-gate:
			return mcp.NewToolResultText("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s.AddTool(mcp.NewTool("ask"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.ElicitationResponse(req.Params.InputResponses, "who"); r != nil {
			content, _ := json.Marshal(r.Content)
			return mcp.NewToolResultText(fmt.Sprintf("action=%s content=%s state=%s", r.Action, content, req.Params.RequestState)), nil
		}
		return server.NewInputRequestBuilder("state-1").Elicit("who", mcp.ElicitationParams{
			Message:         "Who are you?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}).ToolResult(), nil
	})
	// progress-ask sends its progress before it asks: the client's round
	// is an SSE stream by the time it is answered.
	s.AddTool(mcp.NewTool("progress-ask"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.ElicitationResponse(req.Params.InputResponses, "who"); r != nil {
			return mcp.NewToolResultText("answered: " + string(r.Action)), nil
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 2})
		}
		return server.NewInputRequestBuilder("").Elicit("who", mcp.ElicitationParams{
			Message:         "Who are you?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		}).ToolResult(), nil
	})
	s.AddTool(mcp.NewTool("signin"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.ElicitationResponse(req.Params.InputResponses, "signin"); r != nil {
			// The out-of-band step is done. The legacy era announces it; the
			// modern era has no such notification (the retry is the news).
			if sess := server.ClientSessionFromContext(ctx); sess != nil && !server.IsModernRequest(ctx) {
				_ = server.ServerFromContext(ctx).SendElicitationComplete(ctx, sess, signinID)
			}
			return mcp.NewToolResultText("signed in: " + string(r.Action)), nil
		}
		params := mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, URL: "http://127.0.0.1:1/signin", Message: "Sign in"}
		if !server.IsModernRequest(ctx) {
			params.ElicitationID = signinID // the modern era has no elicitation ids
		}
		return server.NewInputRequestBuilder("").Elicit("signin", params).ToolResult(), nil
	})
	s.AddTool(mcp.NewTool("roots"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := server.ServerFromContext(ctx).RequestRoots(ctx, mcp.ListRootsRequest{})
		if err != nil {
			return nil, err
		}
		u.mu.Lock()
		u.rootsAsked = append(u.rootsAsked, server.ClientSessionFromContext(ctx).SessionID())
		u.mu.Unlock()
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return mcp.NewToolResultText(strings.Join(uris, ",")), nil
	})
	s.AddNotificationHandler(string(mcp.MethodNotificationRootsListChanged), func(ctx context.Context, _ mcp.JSONRPCNotification) {
		u.mu.Lock()
		u.rootsChanged = append(u.rootsChanged, server.ClientSessionFromContext(ctx).SessionID())
		u.mu.Unlock()
	})
	s.AddTool(mcp.NewTool("sample"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := server.SamplingResponse(req.Params.InputResponses, "llm"); r != nil {
			return mcp.NewToolResultText(fmt.Sprintf("model=%s", r.Model)), nil
		}
		return server.NewInputRequestBuilder("").Sample("llm", mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}},
			MaxTokens: 10,
		}).ToolResult(), nil
	})
	s.AddTool(mcp.NewTool("slow", mcp.WithReadOnlyHintAnnotation(true)), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.mu.Lock()
		u.started++
		u.mu.Unlock()
		<-ctx.Done()
		u.mu.Lock()
		u.cancelled++
		u.mu.Unlock()
		return nil, ctx.Err()
	})
	s.AddTool(mcp.NewTool("touch"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		server.ServerFromContext(ctx).SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://static"})
		return mcp.NewToolResultText("touched"), nil
	})
	s.AddTool(mcp.NewTool("rpcerror"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("boom")
	})
	s.AddPrompt(mcp.NewPrompt("greet", mcp.WithArgument("name")), func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("greeting", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Hello "+req.Params.Arguments["name"])),
		}), nil
	})
	s.AddResource(mcp.NewResource("test://static", "static", mcp.WithMIMEType("text/plain")), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "static text"}}, nil
	})
	s.AddResourceTemplate(mcp.NewResourceTemplate("test://item/{id}", "item"), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + req.Params.URI}}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: server.NewStreamableHTTPServer(s, server.WithStateful(true)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	u.url = "http://" + ln.Addr().String() + "/mcp"
	return u
}

type nameCompletions struct{}

func (nameCompletions) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if prompt != "greet" {
		return nil, fmt.Errorf("no prompt %q", prompt)
	}
	return &mcp.Completion{Values: []string{"Ada", "Alan"}}, nil
}

// eras are the four combinations of client era and upstream era.
var eras = []struct {
	name     string
	client   string // protocol version the client speaks
	upstream string // the server's protocol setting
}{
	{"legacy-client/legacy-upstream", mcp.ProtocolVersion20251125, "legacy"},
	{"legacy-client/modern-upstream", mcp.ProtocolVersion20251125, "modern"},
	{"modern-client/legacy-upstream", mcp.LATEST_PROTOCOL_VERSION, "legacy"},
	{"modern-client/modern-upstream", mcp.LATEST_PROTOCOL_VERSION, "modern"},
}

// relayClient opens a client of the given era on proxyd's endpoint, with
// the given handlers, recording the notifications it gets.
type relayClient struct {
	*client.Client
	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
}

// clientTag is how activity records name this client.
func (c *relayClient) clientTag() string {
	if id := c.GetSessionId(); id != "" {
		return "session:" + id[:8]
	}
	return "mcp"
}

func (c *relayClient) notifications(method string) []mcp.JSONRPCNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range c.notes {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

func dialRelay(t *testing.T, td *testDaemon, version string, opts ...client.ClientOption) *relayClient {
	t.Helper()
	url, token := endpoint(t, td)
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}
	if !mcp.IsModernProtocol(version) {
		// A legacy client hears of resource updates on its GET stream.
		//lint:ignore SA1019 the legacy era's GET stream is what is tested
		topts = append(topts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, client.WithProtocolVersion(version))
	if !mcp.IsModernProtocol(version) {
		//lint:ignore SA1019 a legacy-era client is one of the peers tested
		opts = append(opts, client.WithLegacyProtocolOnly())
	}
	rc := &relayClient{Client: client.NewClient(tr, opts...)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Start's context bounds the client's GET stream: the client's life.
	if err := rc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	rc.OnNotification(func(n mcp.JSONRPCNotification) {
		rc.mu.Lock()
		rc.notes = append(rc.notes, n)
		rc.mu.Unlock()
	})
	res, err := rc.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "relay-test", Version: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != version {
		t.Fatalf("client speaks %s, want %s", res.ProtocolVersion, version)
	}
	return rc
}

type elicitor struct {
	mu    sync.Mutex
	asked int
	urls  []mcp.ElicitationParams // the URL-mode requests, as the client got them
}

// signinID is the relay upstream's id for its URL elicitation.
const signinID = "signin-7"

func (e *elicitor) urlRequests() []mcp.ElicitationParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]mcp.ElicitationParams(nil), e.urls...)
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode == mcp.ElicitationModeURL {
		e.mu.Lock()
		e.urls = append(e.urls, req.Params)
		e.mu.Unlock()
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
	}
	e.mu.Lock()
	e.asked++
	e.mu.Unlock()
	if req.Params.Message != "Who are you?" {
		return nil, fmt.Errorf("unexpected message %q", req.Params.Message)
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "Ada"}}}, nil
}

type sampler struct{}

func (sampler) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled")}, Model: "test-model"}, nil
}

func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestRelayEveryEra(t *testing.T) {
	up := startRelayUpstream(t)
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: legacy\n    url: %s\n    protocol: legacy\n  - name: modern\n    url: %s\n    protocol: modern\n", up.url, up.url))
	waitReady(t, td, "legacy")
	waitReady(t, td, "modern")
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			srv := era.upstream
			el := &elicitor{}
			c := dialRelay(t, td, era.client, client.WithElicitationHandler(el), client.WithSamplingHandler(sampler{}),
				client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			t.Run("progress and log messages", func(t *testing.T) {
				//lint:ignore SA1019 logging is relayed in both eras
				if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
					t.Fatal(err)
				}
				req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__progress", Meta: &mcp.Meta{ProgressToken: "client-token-7"}}}
				res, err := c.CallTool(ctx, req)
				if err != nil || toolText(t, res) != "done" {
					t.Fatalf("call: %v %+v", err, res)
				}
				progress := c.notifications("notifications/progress")
				if len(progress) != 2 {
					t.Fatalf("%d progress notifications, want 2: %+v", len(progress), progress)
				}
				for _, n := range progress {
					if tok := n.Params.AdditionalFields["progressToken"]; tok != "client-token-7" {
						t.Errorf("progress token %v, want the client's own", tok)
					}
				}
				if msgs := c.notifications("notifications/message"); len(msgs) != 1 {
					t.Errorf("%d log messages, want 1", len(msgs))
				}
			})
			// A notification is not held back for the result (proxyd sends
			// one with what follows when both are in hand): the gated tool
			// answers only once its client has heard its progress.
			t.Run("progress before the call ends", func(t *testing.T) {
				gate := make(chan struct{})
				up.mu.Lock()
				up.gate = gate
				up.mu.Unlock()
				token := "gate-" + era.name
				heard := func() bool {
					for _, n := range c.notifications("notifications/progress") {
						if n.Params.AdditionalFields["progressToken"] == token {
							return true
						}
					}
					return false
				}
				type outcome struct {
					res *mcp.CallToolResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__gated", Meta: &mcp.Meta{ProgressToken: token}}})
					done <- outcome{res, err}
				}()
				released := false
				defer func() {
					if !released {
						close(gate) // let the call end even when the test failed
					}
				}()
				waitfor.True(t, 10*time.Second, "the progress notification to reach the client while the call runs", heard)
				close(gate)
				released = true
				if o := <-done; o.err != nil || toolText(t, o.res) != "released" {
					t.Fatalf("call: %v %+v", o.err, o.res)
				}
			})
			t.Run("elicitation", func(t *testing.T) {
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__ask"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := toolText(t, res); !strings.Contains(got, `action=accept content={"name":"Ada"}`) {
					t.Fatalf("result %q", got)
				}
				if el.asked != 1 {
					t.Fatalf("the client was asked %d times", el.asked)
				}
			})
			t.Run("URL elicitation", func(t *testing.T) {
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__signin"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := toolText(t, res); got != "signed in: accept" {
					t.Fatalf("result %q", got)
				}
				asked := el.urlRequests()
				if len(asked) != 1 || asked[0].URL != "http://127.0.0.1:1/signin" {
					t.Fatalf("URL requests the client got: %+v", asked)
				}
				completions := func() []mcp.JSONRPCNotification {
					return c.notifications(string(mcp.MethodNotificationElicitationComplete))
				}
				if mcp.IsModernProtocol(era.client) {
					// The modern era has no completion notification: the
					// client's retry is how the server hears it is done.
					if n := completions(); len(n) != 0 {
						t.Fatalf("a modern client got %+v", n)
					}
					return
				}
				// A legacy client needs an id (2025-11-25 requires it): the
				// upstream's, or proxyd's for a modern upstream's request; and
				// hears of the completion under that id: the upstream's own
				// notification (legacy upstream), or proxyd's once the modern
				// upstream took the answer.
				id := asked[0].ElicitationID
				if srv == "legacy" && id != signinID || srv == "modern" && !strings.HasPrefix(id, "mcpx-e-") {
					t.Fatalf("elicitationId %q", id)
				}
				waitfor.True(t, 10*time.Second, "notifications/elicitation/complete", func() bool { return len(completions()) > 0 })
				if n := completions(); len(n) != 1 || n[0].Params.AdditionalFields["elicitationId"] != id {
					t.Fatalf("completions %+v, want one for %q", n, id)
				}
			})
			t.Run("sampling", func(t *testing.T) {
				res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__sample"}})
				if err != nil {
					t.Fatal(err)
				}
				if got := toolText(t, res); got != "model=test-model" {
					t.Fatalf("result %q", got)
				}
			})
			t.Run("cancellation", func(t *testing.T) {
				before, started := up.cancels(), up.slowStarted()
				cctx, ccancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					_, err := c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__slow"}})
					done <- err
				}()
				waitfor.True(t, 10*time.Second, "the call to reach the upstream", func() bool { return up.slowStarted() > started })
				ccancel()
				<-done
				waitfor.Cond(t, 10*time.Second, "the upstream to see the cancellation", func() (bool, string) {
					return up.cancels() > before, fmt.Sprintf("%d cancellations", up.cancels()-before)
				})
			})
			t.Run("resource subscription", func(t *testing.T) {
				before := len(c.notifications(mcp.MethodNotificationResourceUpdated))
				if mcp.IsModernProtocol(era.client) {
					lctx, stop := context.WithCancel(ctx)
					defer stop()
					go func() { _ = c.Listen(lctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{"test://static"}}) }()
					waitfor.True(t, 10*time.Second, "the listen acknowledgement", func() bool {
						return len(c.notifications(mcp.MethodNotificationSubscriptionsAcknowledged)) > 0
					})
				} else {
					//lint:ignore SA1019 the legacy era's resources/subscribe is what is tested
					if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: "test://static"}}); err != nil {
						t.Fatal(err)
					}
					// No server has it: refused as a read is, not a
					// subscription that never notifies.
					//lint:ignore SA1019 the legacy era's resources/subscribe is what is tested
					err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: "test://nowhere"}})
					if err == nil || !strings.Contains(err.Error(), "resource not found") {
						t.Fatalf("subscribe to a URI no server has: %v", err)
					}
				}
				if srv == "modern" {
					return // the library's server cannot send updates to a modern listen stream
				}
				if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: srv + "__touch"}}); err != nil {
					t.Fatal(err)
				}
				waitfor.True(t, 10*time.Second, "notifications/resources/updated", func() bool {
					return len(c.notifications(mcp.MethodNotificationResourceUpdated)) > before
				})
				n := c.notifications(mcp.MethodNotificationResourceUpdated)[before]
				if n.Params.AdditionalFields["uri"] != "test://static" {
					t.Fatalf("update %+v", n)
				}
			})
			t.Run("activity", func(t *testing.T) {
				// What the relayed calls saw, as `mcpx activity show` prints it.
				var progress, ask, slow *activity.Record
				waitfor.Cond(t, 10*time.Second, "the calls' activity records", func() (bool, string) {
					recs := listActivity(t, td)
					progress, ask, slow = nil, nil, nil
					for i := range recs {
						r := &recs[i]
						if r.Server != srv || !strings.HasPrefix(r.Client, c.clientTag()) {
							continue
						}
						switch {
						case r.Tool == "progress" && progress == nil:
							progress = r
						case r.Tool == "ask" && strings.Contains(r.Inputs, "accept") && ask == nil:
							ask = r
						case r.Tool == "slow" && slow == nil:
							slow = r
						}
					}
					return progress != nil && ask != nil && slow != nil, fmt.Sprintf("%d records", len(recs))
				})
				if progress.Progress != 2 {
					t.Errorf("progress record counts %d notifications, want 2", progress.Progress)
				}
				if ask.Inputs != "elicitation/create=accept" {
					t.Errorf("ask record inputs %q", ask.Inputs)
				}
				if slow.ErrorClass != "cancelled" || slow.FaultDomain != "client" {
					t.Errorf("cancelled call recorded as %s/%s", slow.ErrorClass, slow.FaultDomain)
				}
			})
			t.Run("prompt, completion, resources", func(t *testing.T) {
				p, err := c.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: srv + "__greet", Arguments: map[string]string{"name": "Ada"}}})
				if err != nil || len(p.Messages) != 1 {
					t.Fatalf("prompt: %v %+v", err, p)
				}
				if tc, ok := p.Messages[0].Content.(mcp.TextContent); !ok || tc.Text != "Hello Ada" {
					t.Fatalf("prompt message %+v", p.Messages[0])
				}
				comp, err := c.Complete(ctx, mcp.CompleteRequest{Params: mcp.CompleteParams{Ref: mcp.PromptReference{Type: "ref/prompt", Name: srv + "__greet"}, Argument: mcp.CompleteArgument{Name: "name", Value: "A"}}})
				if err != nil || len(comp.Completion.Values) != 2 {
					t.Fatalf("completion: %v %+v", err, comp)
				}
				r, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "test://item/42"}})
				if err != nil || len(r.Contents) != 1 {
					t.Fatalf("template read: %v %+v", err, r)
				}
			})
		})
	}
}

// A modern client's call on a legacy upstream that asks for input is
// answered (input_required) while the upstream call waits for the input
// in the request's handler; that answer closes its connection, so the
// client's retry, on a new one, is not held behind the handler. A call
// that asks for nothing keeps its connection. Each round is recorded.
func TestModernRoundAnsweredWhileLegacyCallWaits(t *testing.T) {
	up := startRelayUpstream(t)
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: legacy\n    url: %s\n    protocol: legacy\n", up.url))
	waitReady(t, td, "legacy")
	url, token := endpoint(t, td)
	call := func(tool, extra string) (*http.Response, json.RawMessage) {
		t.Helper()
		resp := postModernCall(t, url, token, tool, extra)
		defer resp.Body.Close()
		var msg struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Result == nil {
			t.Fatalf("%s: %v, error %s", tool, err, msg.Error)
		}
		return resp, msg.Result
	}

	resp, res := call("legacy__progress", "")
	if resp.Close || !strings.Contains(string(res), `"done"`) {
		t.Fatalf("plain call: close %v, result %s", resp.Close, res)
	}

	resp, res = call("legacy__ask", "")
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(res, &ir); err != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || ir.RequestState == "" {
		t.Fatalf("first round: %s", res)
	}
	if !resp.Close {
		t.Error("the early answer keeps its connection: the retry could queue behind the waiting call")
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	state, _ := json.Marshal(ir.RequestState)
	_, res = call("legacy__ask", `,"requestState":`+string(state)+`,"inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Ada"}}}`)
	if !strings.Contains(string(res), `action=accept content={\"name\":\"Ada\"}`) || !strings.Contains(string(res), `"resultType":"complete"`) {
		t.Fatalf("retry: %s", res)
	}

	// A round that was a stream before the upstream asked: the stream
	// ends with its answer, though the call goes on (a client reading
	// it to its end would otherwise wait for the call, which waits for
	// the client).
	resp = postModernCallMeta(t, url, token, "legacy__progress-ask", "", `"progressToken":"p-7",`)
	stream, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("streamed round: %v, %s", err, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(stream), `"progressToken":"p-7"`) || !strings.Contains(string(stream), `"input_required"`) {
		t.Fatalf("streamed round: %s", stream)
	}

	waitfor.Cond(t, 10*time.Second, "both rounds' activity records", func() (bool, string) {
		var inputs []string
		for _, r := range listActivity(t, td) {
			if r.Tool == "ask" {
				inputs = append(inputs, r.Inputs)
			}
		}
		slices.Sort(inputs)
		return slices.Equal(inputs, []string{"elicitation/create=accept", "elicitation/create=asked"}), fmt.Sprint(inputs)
	})
}

// A modern client that never retries leaves its call parked upstream (a
// legacy server waiting for the input) until the call's timeout. Another
// client's call whose server asks for roots on the GET stream, outside any
// call, still gets the request (or, not having declared roots, is told
// it lacks the capability): the parked call's server asked what it needed
// before its round was answered, so the request is not its.
func TestAbandonedParkedCallLeavesOthersTheirRequests(t *testing.T) {
	up := startRelayUpstream(t)
	td := startDaemon(t, fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: legacy\n    url: %s\n    protocol: legacy\n", up.url))
	waitReady(t, td, "legacy")
	url, token := endpoint(t, td)
	const caps = `{"elicitation":{"form":{}},"roots":{}}`
	round := func(tool, extra string) (res, rpcErr string) {
		t.Helper()
		resp := postModernCallCaps(t, url, token, tool, extra, "", caps)
		defer resp.Body.Close()
		var msg struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return string(msg.Result), string(msg.Error)
	}

	// Asked for a name; the client goes away without answering.
	if res, _ := round("legacy__ask", ""); !strings.Contains(res, `"input_required"`) {
		t.Fatalf("the call to abandon: %s", res)
	}

	// A client that did not declare roots is told so at once; the
	// request is not held for the parked call's client.
	resp := postModernCallCaps(t, url, token, "legacy__roots", "", "", `{"elicitation":{"form":{}}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"code":-32021`) || !strings.Contains(string(b), "roots") {
		t.Fatalf("a client without roots: %s (want -32021 naming roots)", b)
	}

	res, rpcErr := round("legacy__roots", "")
	var ir struct {
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(res), &ir); err != nil || len(ir.InputRequests) != 1 {
		t.Fatalf("the other client's call: result %s, error %s (want its roots/list asked)", res, rpcErr)
	}
	var key string
	for k, r := range ir.InputRequests {
		if r.Method != "roots/list" {
			t.Fatalf("asked %s, want roots/list", r.Method)
		}
		key = k
	}
	state, _ := json.Marshal(ir.RequestState)
	res, rpcErr = round("legacy__roots", `,"requestState":`+string(state)+`,"inputResponses":{"`+key+`":{"roots":[{"uri":"file:///work"}]}}`)
	if !strings.Contains(res, "file:///work") {
		t.Fatalf("retry: result %s, error %s", res, rpcErr)
	}
}

// postModernCall posts a modern tools/call of tool (params extra appended
// to its name) from a client that declares form elicitation.
func postModernCall(t *testing.T, url, token, tool, extra string) *http.Response {
	t.Helper()
	return postModernCallMeta(t, url, token, tool, extra, "")
}

// postModernCallMeta is postModernCall with members added to _meta.
func postModernCallMeta(t *testing.T, url, token, tool, extra, meta string) *http.Response {
	t.Helper()
	return postModernCallCaps(t, url, token, tool, extra, meta, `{"elicitation":{"form":{}}}`)
}

// postModernCallCaps is postModernCallMeta from a client that declares caps.
func postModernCallCaps(t *testing.T, url, token, tool, extra, meta, caps string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `"` + extra +
		`,"_meta":{` + meta + `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
