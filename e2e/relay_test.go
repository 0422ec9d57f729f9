package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// What server-everything does during a call — progress notifications,
// asking the client for input (elicitation) and for an LLM completion
// (sampling) — reaches a client through proxyd exactly as it does
// directly: over the HTTP endpoint and over `mcpx stdio`, for a client of
// either protocol era (server-everything speaks the legacy era, so a
// modern client gets its requests as input_required results).

// everythingPeer is an MCP client that answers elicitation and sampling
// the same way every time and counts the progress notifications it gets.
type everythingPeer struct {
	mu       sync.Mutex
	progress int
	elicited int
	sampled  int
}

func (p *everythingPeer) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	p.mu.Lock()
	p.elicited++
	p.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7}}}, nil
}

func (p *everythingPeer) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	p.mu.Lock()
	p.sampled++
	p.mu.Unlock()
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("the model says hi")},
		Model: "e2e-model", StopReason: "endTurn"}, nil
}

func (p *everythingPeer) counts() (int, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress, p.elicited, p.sampled
}

// everythingOutcome is what a client saw of the three calls.
type everythingOutcome struct {
	progress, elicited, sampled int
	elicitText, sampleText      string
}

// runEverythingCalls makes the three calls on c, tool names prefixed.
func runEverythingCalls(t *testing.T, ctx context.Context, c *client.Client, p *everythingPeer, prefix string) everythingOutcome {
	t.Helper()
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" && n.Params.AdditionalFields["progressToken"] == "e2e-progress" {
			p.mu.Lock()
			p.progress++
			p.mu.Unlock()
		}
	})
	call := func(name string, args map[string]any, meta *mcp.Meta) string {
		return callTextMeta(t, ctx, c, prefix+name, args, meta)
	}
	call("trigger-long-running-operation", map[string]any{"duration": 0.4, "steps": 2}, &mcp.Meta{ProgressToken: "e2e-progress"})
	var out everythingOutcome
	out.elicitText = call("trigger-elicitation-request", map[string]any{}, nil)
	out.sampleText = call("trigger-sampling-request", map[string]any{"prompt": "hello"}, nil)
	out.progress, out.elicited, out.sampled = p.counts()
	return out
}

func everythingClientOpts(p *everythingPeer, opts []client.ClientOption) []client.ClientOption {
	return append([]client.ClientOption{client.WithElicitationHandler(p), client.WithSamplingHandler(p)}, opts...)
}

func TestEverythingThroughProxyd(t *testing.T) {
	peers := peersDir(t)
	url := startEverythingHTTP(t, peers)
	e := newEnv(t)
	// The same server again over the old HTTP+SSE transport, whose
	// requests to the client proxyd relays as well.
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: everything\n    url: %s\n  - name: sse\n    url: %s\n    transport: sse\n",
		url, startEverythingOver(t, peers, "sse", "/sse")))
	e.startProxyd()
	e.waitServer("everything", api.StateReady)
	e.waitServer("sse", api.StateReady)
	ci := e.connectInfo()

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	p := &everythingPeer{}
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	direct := client.NewClient(tr, everythingClientOpts(p, []client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)})...)
	initClient(t, ctx, direct)
	want := runEverythingCalls(t, ctx, direct, p, "")
	if want.progress != 2 || want.elicited != 1 || want.sampled != 1 {
		t.Fatalf("directly: %d progress, %d elicitations, %d samplings; want 2, 1, 1", want.progress, want.elicited, want.sampled)
	}
	if !strings.Contains(want.elicitText, "Ada Lovelace") || !strings.Contains(want.sampleText, "the model says hi") {
		t.Fatalf("directly: results %q / %q", want.elicitText, want.sampleText)
	}

	for _, tc := range clientProtocols {
		for _, via := range []string{"http", "stdio"} {
			for _, upstream := range []string{"everything", "sse"} {
				t.Run(via+"/"+tc.name+"/"+upstream, func(t *testing.T) {
					p := &everythingPeer{}
					var tr transport.Interface
					if via == "http" {
						tr, err = transport.NewStreamableHTTP(ci.URL, transport.WithHTTPHeaders(bearerHeader(ci)))
						if err != nil {
							t.Fatal(err)
						}
					} else {
						stderr := &syncbuf.Buffer{}
						tr = transport.NewStdioWithOptions(mcpxBin, e.environ(), append(e.globals(), "stdio"), transport.WithCommandStderrWriter(stderr))
						defer func() {
							if t.Failed() {
								t.Logf("mcpx stdio stderr:\n%s", stderr)
							}
						}()
					}
					c := client.NewClient(tr, everythingClientOpts(p, tc.opts)...)
					initClient(t, ctx, c)
					got := runEverythingCalls(t, ctx, c, p, upstream+"__")
					if got != want {
						t.Errorf("through proxyd:\n%+v\nwant (directly):\n%+v", got, want)
					}
				})
			}
		}
	}

	t.Run("mcpx call", func(t *testing.T) {
		// Progress as plain lines on stderr (no terminal here).
		// The same call as directly: as many progress lines as the direct
		// client got notifications.
		r := e.run("call", "everything", "trigger-long-running-operation", "duration=0.4", "steps=2")
		if r.code != 0 || strings.Count(r.stderr, "progress: ") != want.progress || !strings.Contains(r.stderr, "progress: 2/2") {
			t.Errorf("progress lines (want %d):\n%s", want.progress, r)
		}
		// Nothing but the result with -o json.
		var res api.CallResponse
		r = e.runJSON(0, &res, "call", "everything", "trigger-long-running-operation", "duration=0.2", "steps=2", "-o", "json")
		if strings.Contains(r.stderr, "progress") {
			t.Errorf("progress with -o json:\n%s", r)
		}
		// Elicitation answered from a file, and declined.
		answer := filepath.Join(t.TempDir(), "answer.json")
		if err := os.WriteFile(answer, []byte(`{"name":"Grace Hopper","check":true,"email":"grace@example.com"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		r = e.run("call", "everything", "trigger-elicitation-request", "--elicit", "@"+answer)
		if r.code != 0 || !strings.Contains(r.stdout, "Grace Hopper") || !strings.Contains(r.stderr, "The server asks:") {
			t.Errorf("elicitation from a file:\n%s", r)
		}
		// What the server got is what it gets from a client giving the same
		// answer directly.
		direct := elicitDirectly(t, ctx, url, map[string]any{"name": "Grace Hopper", "check": true, "email": "grace@example.com"})
		if got, want := userInputs(r.stdout), userInputs(direct); got == "" || got != want {
			t.Errorf("the tool's summary through mcpx call:\n%s\nwant (directly):\n%s", got, want)
		}
		r = e.run("call", "everything", "trigger-elicitation-request", "--elicit", "decline")
		if r.code != 0 || !strings.Contains(r.stdout, "decline") {
			t.Errorf("elicitation declined:\n%s", r)
		}
		// Sampling refused: the CLI has no model.
		r = e.run("call", "everything", "trigger-sampling-request", "prompt=hi")
		if r.code != 4 || !strings.Contains(r.stderr, "mcpx call has no model") {
			t.Errorf("sampling from mcpx call:\n%s", r)
		}
		recs := e.relayRecords()
		var elicit, sample, progress bool
		for _, rec := range recs {
			switch {
			case rec.Tool == "trigger-elicitation-request" && rec.Inputs == "elicitation/create=decline":
				elicit = true
			case rec.Tool == "trigger-sampling-request" && rec.Inputs == "sampling/createMessage=refused":
				sample = true
			case rec.Tool == "trigger-long-running-operation" && rec.Client == "cli" && rec.Progress == 2:
				progress = true
			}
		}
		if !elicit || !sample || !progress {
			t.Errorf("activity: elicitation decline %v, sampling refused %v, progress 2 %v", elicit, sample, progress)
		}
	})

	t.Run("mcpx call at a terminal", func(t *testing.T) { testCallAtTerminal(t, e, url) })
	t.Run("mcpx call's progress bar", func(t *testing.T) { testProgressBarAtTerminal(t, e, want.progress) })
	t.Run("Ctrl-C cancels the call upstream", func(t *testing.T) {
		cmd := exec.Command(mcpxBin, append(e.globals(), "call", "everything", "trigger-long-running-operation", "duration=30", "steps=30")...)
		cmd.Env = e.environ()
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var seen []string
		for l := range lines {
			seen = append(seen, l)
			if strings.HasPrefix(l, "progress: ") {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			seen = append(seen, l)
		}
		err = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("exit %d (%v), want 130; stderr:\n%s", code, err, strings.Join(seen, "\n"))
		}
		if !strings.Contains(strings.Join(seen, "\n"), "call cancelled") {
			t.Errorf("stderr:\n%s", strings.Join(seen, "\n"))
		}
		var rec *activity.Record
		waitFor(t, "the cancelled call's record", func() (bool, string) {
			for _, r := range e.relayRecords() {
				if r.Tool == "trigger-long-running-operation" && r.ErrorClass == "cancelled" {
					rec = &r
					return true, ""
				}
			}
			return false, "no record"
		})
		if rec.FaultDomain != "client" || rec.Progress < 1 {
			t.Errorf("cancelled call recorded as %+v", *rec)
		}
		show := e.mustRun("activity", "show", fmt.Sprint(rec.ID))
		if !strings.Contains(show.stdout, "cancelled") || !strings.Contains(show.stdout, "progress") {
			t.Errorf("activity show:\n%s", show)
		}
	})
}

// relayRecords lists the activity log with the relay's fields.
func (e *env) relayRecords() []activity.Record {
	e.t.Helper()
	var recs []activity.Record
	e.runJSON(0, &recs, "activity", "--limit", "1000")
	return recs
}
