package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

func TestWithMeta(t *testing.T) {
	meta := json.RawMessage(`{"k":1}`)
	tests := []struct {
		name, params, want string
	}{
		{"no params", ``, `{"_meta":{"k":1}}`},
		{"empty object", `{}`, `{"_meta":{"k":1}}`},
		{"empty object with spaces", ` { } `, `{ "_meta":{"k":1}}`},
		{"fields", `{"name":"echo"}`, `{"name":"echo","_meta":{"k":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			got := withMeta(params, meta)
			if string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("withMeta(%q) = %s, want %s", tt.params, got, tt.want)
			}
		})
	}
}

func TestEnvelope(t *testing.T) {
	rename := &relay.Edit{Key: "name", Value: []byte(`"x"`), Drop: "_meta"}
	dropMeta := &relay.Edit{Drop: "_meta"}
	tests := []struct {
		name, method, params string
		edit                 *relay.Edit
		meta, want           string
	}{
		{"no params", "ping", ``, nil, ``, `{"jsonrpc":"2.0","id":"7","method":"ping"}`},
		{"params", "tools/call", `{"name":"echo"}`, nil, ``, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"echo"}}`},
		{"params and meta", "tools/call", `{"name":"echo"}`, nil, `{"k":1}`, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"echo","_meta":{"k":1}}}`},
		{"meta alone", "tools/list", ``, nil, `{"k":1}`, `{"jsonrpc":"2.0","id":"7","method":"tools/list","params":{"_meta":{"k":1}}}`},
		{"method needing escapes", `a"b`, ``, nil, ``, `{"jsonrpc":"2.0","id":"7","method":"a\"b"}`},
		{"renamed", "tools/call", `{"name":"s__x","arguments":{"t":1}}`, rename, ``, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"x","arguments":{"t":1}}}`},
		{"renamed, client's meta left out", "tools/call", ` {"_meta":{"a":1}, "name":"s__x"} `, rename, ``, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params": { "name":"x"} }`},
		{"renamed, with meta", "tools/call", `{"name":"s__x","_meta":{"a":1}} `, rename, `{"k":1}`, `{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"x","_meta":{"k":1}}}`},
		{"client's meta was all", "resources/read", `{"_meta":{"a":1}}`, dropMeta, `{"k":1}`, `{"jsonrpc":"2.0","id":"7","method":"resources/read","params":{"_meta":{"k":1}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params, meta json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			if tt.meta != "" {
				meta = json.RawMessage(tt.meta)
			}
			parts := envelope("7", tt.method, tt.edit.Parts(params), meta)
			if got := bytes.Join(parts, nil); string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("envelope = %s, want %s", got, tt.want)
			}
		})
	}
}

// Large params, renamed or not, with _meta added or not, are copied
// once on their way into the request's body: the envelope's parts are
// sub-slices of them, joined once.
func TestEnvelopeCopiesLargeParamsOnce(t *testing.T) {
	params := json.RawMessage(`{"name":"s__echo","arguments":{"text":"` + strings.Repeat("x", 64<<10) + `"}}`)
	for _, edit := range []*relay.Edit{nil, {Key: "name", Value: []byte(`"echo"`), Drop: "_meta"}} {
		for _, meta := range []json.RawMessage{nil, json.RawMessage(`{"k":1}`)} {
			var body []byte
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const runs = 20
			for range runs {
				body = bytes.Join(envelope("7", "tools/call", edit.Parts(params), meta), nil)
			}
			runtime.ReadMemStats(&after)
			// One copy is the params rounded up to the allocator's pages;
			// a second would double it.
			if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > uint64(len(params))*3/2 {
				t.Errorf("edit %v, meta %s: %d bytes allocated for a body of %d", edit != nil, meta, perRun, len(body))
			}
			if !json.Valid(body) {
				t.Errorf("edit %v, meta %s: invalid body", edit != nil, meta)
			}
		}
	}
}

func TestCallParams(t *testing.T) {
	tests := []struct {
		name, tool, args, want string
	}{
		{"no arguments", "echo", ``, `{"name":"echo"}`},
		{"null arguments", "echo", `null`, `{"name":"echo"}`},
		{"arguments", "echo", `{"text":"hi"}`, `{"name":"echo","arguments":{"text":"hi"}}`},
		{"name needing escapes", `we"ird<`, `{}`, `{"name":"we\"ird\u003c","arguments":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CallParams(tt.tool, json.RawMessage(tt.args))
			if err != nil || string(got) != tt.want || !json.Valid(got) {
				t.Fatalf("callParams = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// rawRequest sets the standard headers itself; they must be the ones the
// library would set for the same request.
func TestStandardHeadersMatchLibrary(t *testing.T) {
	for _, name := range []string{"echo", "tool with spaces", "ünïcode", ""} {
		params, _ := CallParams(name, json.RawMessage(`{"a":1}`))
		want := mcp.StandardHeaders(mcp.LATEST_PROTOCOL_VERSION, mcp.MethodToolsCall, params)
		got := map[string]string{mcp.HeaderMethod: string(mcp.MethodToolsCall)}
		if v, ok := mcp.EncodeHeaderValue(name); ok {
			got[mcp.HeaderName] = v
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: headers %v, library %v", name, got, want)
		}
	}
}

// A modern-era server checks that parameters annotated with x-mcp-header
// arrive as Mcp-Param-* headers too; proxyd mirrors them (SEP-2243).
func TestParamHeadersMirrored(t *testing.T) {
	for _, era := range []mcpserver.Era{mcpserver.EraModern, mcpserver.EraLegacy} {
		t.Run(string(era), func(t *testing.T) {
			fx := startFixture(t, era)
			m := newManager(t, config.Server{Name: "fx", URL: fx.URL()})
			c, _ := m.Get("fx")
			waitState(t, c, api.StateReady)
			if tool, ok := c.Tool(mcpserver.ToolRegionEcho); !ok || !tool.ParamHeaders {
				t.Fatalf("%s: known %v, param headers %v", mcpserver.ToolRegionEcho, ok, tool.ParamHeaders)
			}
			for _, region := range []string{"eu-west", "zürich"} {
				res, err := c.CallTool(context.Background(), mcpserver.ToolRegionEcho,
					json.RawMessage(fmt.Sprintf(`{"region":%q,"text":"hi"}`, region)))
				if err != nil {
					t.Fatalf("region %q: %v", region, err)
				}
				if res.IsError || !strings.Contains(string(res.Raw), region+": hi") {
					t.Fatalf("region %q: result %s", region, res.Raw)
				}
			}
		})
	}
}

// A tool whose x-mcp-header annotation breaks SEP-2243 (here: a space in
// the header name) is left out, with the rest of the server's tools kept:
// the MCP library would refuse to serve it downstream, and panics doing so.
func TestInvalidParamHeaderToolLeftOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&msg) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			result = `{"tools":[` +
				`{"name":"good","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},` +
				`{"name":"bad","inputSchema":{"type":"object","properties":{"tenant":{"type":"string","x-mcp-header":"X Tenant"}}}}]}`
		default:
			w.WriteHeader(http.StatusAccepted) // notifications
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}))
	defer srv.Close()
	m := newManager(t, config.Server{Name: "raw", URL: srv.URL + "/mcp", Protocol: config.ProtocolLegacy})
	c, _ := m.Get("raw")
	waitState(t, c, api.StateReady)
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[good]" {
		t.Fatalf("tools %v, want [good]", names)
	}
}

// A server that asks the client something while proxyd connects (here on
// its tools/list answer's stream, which the MCP library reads) gets what
// proxyd answers outside any call, as it would once ready: no roots, and
// sampling or elicitation refused as method-not-found naming why. The
// library, with no roots of its own, answered with an error, and refused
// the others as an internal error.
func TestAskedWhileConnecting(t *testing.T) {
	tests := []struct {
		method string
		check  func(result, rpcErr json.RawMessage) error
	}{
		{"roots/list", func(result, rpcErr json.RawMessage) error {
			var r struct {
				Roots []json.RawMessage `json:"roots"`
			}
			if json.Unmarshal(result, &r) != nil || r.Roots == nil || len(r.Roots) != 0 || rpcErr != nil {
				return errors.New("want a result with no roots")
			}
			return nil
		}},
		{"sampling/createMessage", refusedOutsideACall},
		{"elicitation/create", refusedOutsideACall},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			b := askWhileConnecting(t, tt.method)
			var resp struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(b, &resp); err != nil {
				t.Fatalf("%s asked while connecting answered %s: %v", tt.method, b, err)
			}
			if err := tt.check(resp.Result, resp.Error); err != nil {
				t.Fatalf("%s asked while connecting answered %s: %v", tt.method, b, err)
			}
		})
	}
}

func refusedOutsideACall(result, rpcErr json.RawMessage) error {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if result != nil || json.Unmarshal(rpcErr, &e) != nil || e.Code != -32601 || !strings.Contains(e.Message, "outside a tool call") {
		return errors.New("want -32601 saying it came outside a tool call")
	}
	return nil
}

// askWhileConnecting serves a legacy server that sends a request of
// method on its tools/list answer's stream and lists its tools once it
// has the answer; it returns the answer proxyd posted.
func askWhileConnecting(t *testing.T, method string) []byte {
	t.Helper()
	answer := make(chan []byte, 1) // the client's answer, as posted
	got := make(chan []byte, 1)    // what tools/list waited for
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		switch msg.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}`, msg.ID)
		case "tools/list":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"method\":%q,\"params\":{}}\n\n", method)
			w.(http.Flusher).Flush()
			var b []byte
			select {
			case b = <-answer:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second): // list anyway; the test fails on the missing answer
			}
			got <- b
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[{\"name\":\"t\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n", msg.ID)
		case "":
			w.WriteHeader(http.StatusAccepted)
			if string(msg.ID) == `"r1"` {
				answer <- body
			}
		default:
			w.WriteHeader(http.StatusAccepted) // notifications
		}
	}))
	t.Cleanup(srv.Close)
	m := newManager(t, config.Server{Name: "raw", URL: srv.URL + "/mcp", Protocol: config.ProtocolLegacy})
	c, _ := m.Get("raw")
	waitState(t, c, api.StateReady)
	return <-got
}
