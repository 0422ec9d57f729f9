package proxyd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// testDaemon runs a daemon in-process on a temp socket and state dir.
type testDaemon struct {
	socket, stateDir, configPath string
	client                       *api.Client
	stop                         func() error
}

func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "mcpx-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startDaemon(t testing.TB, configYAML string, mutate ...func(*Options)) *testDaemon {
	t.Helper()
	dir := shortTempDir(t)
	td := &testDaemon{
		socket:     filepath.Join(dir, "run", "s.sock"),
		stateDir:   filepath.Join(dir, "state"),
		configPath: filepath.Join(dir, "config.yaml"),
	}
	if configYAML == "" {
		configYAML = "listen: 127.0.0.1:0\n"
	}
	if err := os.WriteFile(td.configPath, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	opts := Options{
		Socket: td.socket, StateDir: td.stateDir, ConfigPath: td.configPath, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: ready,
	}
	for _, m := range mutate {
		m(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, opts) }()
	select {
	case <-ready:
	case err := <-errc:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("daemon not ready")
	}
	var stopped bool
	td.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-errc
	}
	t.Cleanup(func() { _ = td.stop() })
	td.client = api.NewClient(td.socket, "test")
	return td
}

func TestSocketPermissions(t *testing.T) {
	td := startDaemon(t, "")
	fi, err := os.Stat(td.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(td.socket))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v, want 0700", di.Mode().Perm())
	}
	for _, name := range []string{DBFile, TokenFile} {
		fi, err := os.Stat(filepath.Join(td.stateDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if err := td.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(td.socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind after shutdown: %v", err)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	td := startDaemon(t, "")
	err := Run(context.Background(), Options{Socket: td.socket, StateDir: t.TempDir(), ConfigPath: filepath.Join(t.TempDir(), "c.yaml"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var running *AlreadyRunningError
	if !errors.As(err, &running) {
		t.Fatalf("second daemon: %v, want AlreadyRunningError", err)
	}
	if _, err := td.client.Status(context.Background()); err != nil {
		t.Fatalf("first daemon stopped answering: %v", err)
	}
}

func TestStaleSocketRemoved(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // leaves a dead socket file, as a SIGKILLed daemon does
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	l2, err := listenSocket(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
}

func TestSocketPathTooLongAndNotASocket(t *testing.T) {
	if _, err := listenSocket("/tmp/" + strings.Repeat("x", 120)); err == nil || !strings.Contains(err.Error(), "longer") {
		t.Fatalf("long path: %v", err)
	}
	f := filepath.Join(shortTempDir(t), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := listenSocket(f); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
}

func TestPeerUIDChecked(t *testing.T) {
	other := os.Getuid() + 4242
	td := startDaemon(t, "", func(o *Options) { o.AllowedUID = &other })
	_, err := td.client.Status(context.Background())
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("a peer with another uid got %v, want 403", err)
	}
}

func TestBrowserRequestsRefused(t *testing.T) {
	td := startDaemon(t, "")
	hc := td.socketHTTP()
	for _, h := range []string{"Origin", "Referer"} {
		req, _ := http.NewRequest(http.MethodGet, "http://proxyd.sock/v1/status", nil)
		req.Header.Set(h, "http://evil.example")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: status %d, want 403", h, resp.StatusCode)
		}
	}
}

func TestMalformedConfigRefusedAtStart(t *testing.T) {
	dir := shortTempDir(t)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("servers:\n  - name: docs\n    urll: http://127.0.0.1:1/mcp\n"), 0o600)
	err := Run(context.Background(), Options{Socket: filepath.Join(dir, "s.sock"), StateDir: dir, ConfigPath: cfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "config.yaml:3:") {
		t.Fatalf("malformed config: %v, want an error naming config.yaml:3:", err)
	}
}

func TestReloadKeepsRunningConfigOnError(t *testing.T) {
	fx, err := mcpserver.Start(mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	td := startDaemon(t, "listen: 127.0.0.1:0\nservers:\n  - name: fx\n    url: "+fx.URL()+"\n")
	ctx := context.Background()
	if err := os.WriteFile(td.configPath, []byte("servers: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := td.client.Reload(ctx); err == nil {
		t.Fatal("reload of a malformed file succeeded")
	}
	st, err := td.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 1 || st.ConfigError == "" {
		t.Fatalf("want the old server kept and the config error shown, got %+v", st)
	}
}

// socketHTTP is an HTTP client of the daemon's socket (host proxyd.sock).
func (td *testDaemon) socketHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", td.socket)
	}}}
}

func TestWithHint(t *testing.T) {
	tests := []struct{ msg, hint, want string }{
		{`server "fx" has no tool "ech" (see 'mcpx tools fx')`, ` (did you mean "echo"?)`, `server "fx" has no tool "ech" (did you mean "echo"?) (see 'mcpx tools fx')`},
		{`no server named "fxx"`, ` (did you mean "fx"?)`, `no server named "fxx" (did you mean "fx"?)`},
		{`server "fx" has no tool "zzz" (see 'mcpx tools fx')`, "", `server "fx" has no tool "zzz" (see 'mcpx tools fx')`},
	}
	for _, tt := range tests {
		if got := withHint(tt.msg, tt.hint); got != tt.want {
			t.Errorf("withHint(%q, %q) = %q, want %q", tt.msg, tt.hint, got, tt.want)
		}
	}
}
