package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
)

// `mcpx call` on a terminal asks the person for an elicitation's answer,
// field by field with the defaults offered; what the person typed reaches
// the upstream exactly as the same answer given by a client directly.

// typedAnswers are what the person types at each field of server-everything's
// trigger-elicitation-request; a field not named gets Enter (its default,
// or nothing for an optional field without one).
var typedAnswers = map[string]string{
	"name":                   "Ada Lovelace",
	"check":                  "y",
	"email":                  "ada@example.com",
	"integer":                "7",
	"titledSingleSelectEnum": "3", // the third choice: Wonder Woman, hero-3
}

// sameAnswer is the answer a direct client gives: the typed values and the
// schema's defaults for the fields left to Enter.
var sameAnswer = map[string]any{
	"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7,
	"firstLine": "It was a dark and stormy night.", "number": 3.14,
	"untitledSingleSelectEnum": "Monica", "untitledMultipleSelectEnum": []any{"Guitar"},
	"titledSingleSelectEnum": "hero-3", "titledMultipleSelectEnum": []any{"fish-1"},
	"legacyTitledEnum": "pet-1",
}

type fixedElicitor struct{ content map[string]any }

func (f fixedElicitor) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: f.content}}, nil
}

var (
	// fieldLabel is the line that names a field: "Title (name)[: description]".
	fieldLabel = regexp.MustCompile(`\((\w+)\)(?::[^\n]*)?\r?\n`)
	// rawResult is where server-everything's result shows the answer it got.
	rawResult = "Raw result: "
)

// testCallAtTerminal runs `mcpx call everything trigger-elicitation-request`
// on a pseudo-terminal, answers its prompts, and checks what the upstream
// got against the same call made directly (directURL) with the same answer.
func testCallAtTerminal(t *testing.T, e *env, directURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	want := elicitDirectly(t, ctx, directURL, sameAnswer)

	term := startOnPTY(t, ctx, e, "call", "everything", "trigger-elicitation-request")
	tty, out := term.tty, term.out

	// Answer each prompt as it appears: the accept question first, then one
	// prompt per field, each after the line naming its field.
	asked := map[string]bool{}
	answered := 0
	for done := false; !done; {
		var prompt string
		waitfor.Cond(t, 20*time.Second, "the next prompt or the result", func() (bool, string) {
			s := out.String()
			if strings.Contains(s, rawResult) && strings.HasSuffix(strings.TrimRight(s, "\r\n "), "}") {
				done = true
				return true, ""
			}
			// A new prompt: the buffer ends with one, after the echo of
			// the last answer.
			if !strings.HasSuffix(s, ": ") || !strings.Contains(s[answered:], "\n") {
				return false, lastLine(s)
			}
			prompt = s[answered:]
			return true, ""
		})
		if done {
			break
		}
		answer := ""
		switch {
		case strings.Contains(prompt, "[Y]es, [d]ecline, [c]ancel"):
			answer = "y"
		default:
			m := fieldLabel.FindAllStringSubmatch(prompt, -1)
			if m == nil {
				t.Fatalf("a prompt without a field: %q", prompt)
			}
			name := m[len(m)-1][1]
			if asked[name] {
				t.Fatalf("field %s asked twice (an answer was refused): %q", name, prompt)
			}
			asked[name] = true
			answer = typedAnswers[name]
		}
		before := out.String()
		if _, err := tty.Write([]byte(answer + "\n")); err != nil {
			t.Fatal(err)
		}
		answered = len(before)
	}
	term.wait()
	for name := range sameAnswer {
		if !asked[name] {
			t.Errorf("field %s was not asked", name)
		}
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	// What server-everything says it got, through proxyd and directly.
	if a, b := userInputs(got), userInputs(want); a == "" || a != b {
		t.Errorf("the tool's summary through mcpx call:\n%s\nwant (directly):\n%s", a, b)
	}
	if a, b := rawAnswer(t, got), rawAnswer(t, want); !reflect.DeepEqual(a, b) {
		t.Errorf("the answer the upstream got through mcpx call:\n%v\nwant (directly):\n%v", a, b)
	}
}

// ptyProc is mcpx running on a pseudo-terminal: its raw output, byte for
// byte (the tmux terminal of top_test.go shows the screen instead).
type ptyProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	out  *syncbuf.Buffer // everything mcpx wrote (stdout and stderr), with the echo
	read chan struct{}
}

// startOnPTY runs mcpx with args on a pseudo-terminal: its stdin,
// stdout and stderr.
func startOnPTY(t *testing.T, ctx context.Context, e *env, args ...string) *ptyProc {
	t.Helper()
	return startOnTerminal(t, ctx, e, "dumb", args...)
}

// startOnTerminal is startOnPTY with TERM=termType.
func startOnTerminal(t *testing.T, ctx context.Context, e *env, termType string, args ...string) *ptyProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, mcpxBin, append(e.globals(), args...)...)
	cmd.Env = append(e.environ(), "TERM="+termType)
	cmd.WaitDelay = 5 * time.Second
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatalf("starting mcpx on a pseudo-terminal: %v", err)
	}
	term := &ptyProc{t: t, cmd: cmd, tty: tty, out: &syncbuf.Buffer{}, read: make(chan struct{})}
	t.Cleanup(func() {
		_ = tty.Close()
		if t.Failed() {
			t.Logf("the terminal:\n%q", term.out)
		}
	})
	go func() {
		defer close(term.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			_, _ = term.out.Write(buf[:n])
			if err != nil {
				return // EIO once mcpx has exited and closed the terminal
			}
		}
	}()
	return term
}

// wait waits for mcpx to exit successfully and for all it wrote.
func (term *ptyProc) wait() {
	term.t.Helper()
	if err := term.cmd.Wait(); err != nil {
		term.t.Fatalf("mcpx: %v", err)
	}
	<-term.read
}

// testProgressBarAtTerminal: on a terminal, progress is one bar redrawn in
// place, a state per notification the same call gets directly.
func testProgressBarAtTerminal(t *testing.T, e *env, directProgress int) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	term := startOnPTY(t, ctx, e, "call", "everything", "trigger-long-running-operation", "duration=0.4", "steps=2")
	term.wait()
	got := term.out.String()
	bars := progressBars.FindAllString(got, -1)
	if len(bars) != directProgress || directProgress == 0 {
		t.Fatalf("%d progress bars %q, want %d (as many as notifications directly)", len(bars), bars, directProgress)
	}
	if bars[len(bars)-1] != "["+strings.Repeat("#", 30)+"] 2/2" {
		t.Errorf("the last bar %q is not full", bars[len(bars)-1])
	}
	if strings.Contains(got, "progress: ") {
		t.Errorf("plain progress lines on a terminal")
	}
	// Redrawn in place: the line is cleared before the next bar.
	if i := strings.Index(got, bars[0]); i < 0 || !strings.Contains(got[i:], "\r\x1b[K"+bars[1]) {
		t.Errorf("the bar is not redrawn in place")
	}
	if !strings.Contains(got, "Long running operation completed") {
		t.Errorf("no result")
	}
}

// progressBars matches the bar mcpx call draws: 30 cells and the count.
var progressBars = regexp.MustCompile(`\[[#·]{30}\] \d+/\d+`)

// elicitDirectly calls server-everything's trigger-elicitation-request at
// directURL as a client that answers with content, and returns the
// result's text.
func elicitDirectly(t *testing.T, ctx context.Context, directURL string, content map[string]any) string {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(directURL)
	if err != nil {
		t.Fatal(err)
	}
	direct := client.NewClient(tr, client.WithElicitationHandler(fixedElicitor{content}), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	initClient(t, ctx, direct)
	res, err := direct.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "trigger-elicitation-request"}})
	if err != nil || res.IsError {
		t.Fatalf("directly: %v %+v", err, res)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(strings.TrimRight(s, "\r\n"), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// userInputs is the "User inputs:" block of server-everything's result.
func userInputs(s string) string {
	i := strings.Index(s, "User inputs:")
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, rawResult); j >= 0 {
		s = s[:j]
	}
	return strings.TrimSpace(s)
}

// rawAnswer decodes the elicitation result server-everything echoes.
func rawAnswer(t *testing.T, s string) map[string]any {
	t.Helper()
	i := strings.Index(s, rawResult)
	if i < 0 {
		t.Fatalf("no %q in %q", rawResult, s)
	}
	var v map[string]any
	if err := json.NewDecoder(bytes.NewReader([]byte(s[i+len(rawResult):]))).Decode(&v); err != nil {
		t.Fatalf("decoding the raw result: %v", err)
	}
	return v
}

// A call whose timeout passes while the person sits at a prompt was the
// client's to finish: the upstream was waiting for the answer. It is
// classified timeout in the client's domain, in either era.
func TestCallTimeoutAtAPromptIsTheClients(t *testing.T) {
	e, _ := conformanceBehindProxyd(t, "timeout: 1s")
	for _, server := range []string{"legacy", "modern"} {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		term := startOnPTY(t, ctx, e, "call", server, "test_elicitation", "message=Who are you?")
		waitfor.Cond(t, 20*time.Second, "the prompt", func() (bool, string) {
			return strings.Contains(term.out.String(), "[Y]es, [d]ecline, [c]ancel"), lastLine(term.out.String())
		})
		// Nobody answers.
		err := term.cmd.Wait()
		<-term.read
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Errorf("%s: mcpx call ended with %v, want exit 4", server, err)
		}
		if out := term.out.String(); !strings.Contains(out, "error_class=timeout fault_domain=client") || !strings.Contains(out, "the call's time ran out before the answer") ||
			!strings.Contains(out, "while its client was answering the upstream's request for input") {
			t.Errorf("%s: the timeout at the prompt is not the client's:\n%s", server, out)
		}
	}
}
