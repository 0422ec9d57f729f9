package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErr  error
		wantOut  string
		wantCode int
	}{
		{"help lists subcommands", []string{"help"}, nil, "  mcp ", 0},
		{"no subcommand", nil, errUsage, "", 2},
		{"unknown subcommand", []string{"nope"}, errUsage, "", 2},
		{"non-loopback addr", []string{"mcp", "--addr", "0.0.0.0:0"}, errUsage, "", 2},
		{"all interfaces", []string{"mcp", "--addr", ":0"}, errUsage, "", 2},
		{"bad era", []string{"mcp", "--era", "ancient"}, errUsage, "", 2},
		{"bad session loss", []string{"mcp", "--session-loss", "410"}, errUsage, "", 2},
		{"stray argument", []string{"mcp", "extra"}, errUsage, "", 2},
		{"unknown flag", []string{"mcp", "--nope"}, errUsage, "", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, &out, &errOut)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("run(%q) = %v, want %v", tt.args, err, tt.wantErr)
			}
			if err != nil && exitCode(err) != tt.wantCode {
				t.Fatalf("exit code %d, want %d", exitCode(err), tt.wantCode)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("stdout %q lacks %q", out.String(), tt.wantOut)
			}
		})
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	register(fixtureCmd{name: "mcp"})
}

// readReady reads the "key: value" ready lines until want is seen.
func readReady(t *testing.T, r io.Reader, keys ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	for _, key := range keys {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q", key)
			}
			k, v, found := strings.Cut(line, ": ")
			if !found || k != key {
				t.Fatalf("line %q, want %q first", line, key+": ...")
			}
			got[k] = v
		case <-timeout:
			t.Fatalf("no %q line", key)
		}
	}
	return got
}

// checkServing drives the fixture behind url with a real client and reads
// its counters from the control API.
func checkServing(t *testing.T, url, controlURL string, wantInit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"text": "hi"}
	if _, err := c.CallTool(ctx, req); err != nil {
		t.Fatalf("call echo: %v", err)
	}
	resp, err := http.Get(controlURL + "stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Initialize int            `json:"initialize"`
		Executions map[string]int `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Initialize != wantInit || st.Executions["echo"] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRunMCPInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--era", "legacy"}, pw, io.Discard)
		pw.Close()
	}()
	ready := readReady(t, pr, "url", "control")
	if !strings.HasSuffix(ready["url"], "/mcp") || !strings.HasPrefix(ready["url"], "http://127.0.0.1:") {
		t.Fatalf("url %q", ready["url"])
	}
	checkServing(t, ready["url"], ready["control"], 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	bin := filepath.Join(t.TempDir(), "mcpx-fixtures")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cmd := exec.Command(bin, "mcp", "--session-loss", "400")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	ready := readReady(t, stdout, "url", "control")
	checkServing(t, ready["url"], ready["control"], 0) // both eras: mcp-go settles modern

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15s after SIGTERM")
	}
}
