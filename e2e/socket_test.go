package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

func TestStateFilesArePrivate(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	e.startProxyd()
	tests := []struct {
		path string
		want os.FileMode
	}{
		{e.Socket, 0o600},
		{filepath.Dir(e.Socket), 0o700},
		{e.StateDir, 0o700},
		{filepath.Join(e.StateDir, "proxyd.token"), 0o600},
		{filepath.Join(e.StateDir, "state.db"), 0o600},
	}
	for _, tc := range tests {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Errorf("stat %s: %v", tc.path, err)
			continue
		}
		if got := fi.Mode().Perm(); got != tc.want {
			t.Errorf("%s has mode %#o, want %#o", tc.path, got, tc.want)
		}
	}
	// The bearer is a credential: status and logs never show it.
	token, err := os.ReadFile(filepath.Join(e.StateDir, "proxyd.token"))
	if err != nil {
		t.Fatalf("reading the token: %v", err)
	}
	tok := strings.TrimSpace(string(token))
	for _, args := range [][]string{{"status"}, {"status", "-o", "json"}, {"servers"}} {
		if r := e.run(args...); strings.Contains(r.stdout+r.stderr, tok) {
			t.Errorf("mcpx %v prints the bearer token", args)
		}
	}
}

func TestSigtermStopsCleanly(t *testing.T) {
	e, p := fixtureEnv(t, mcpserver.EraLegacy, "legacy")
	e.mustRun("call", "fixture", "echo", "text=before-term")

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if err := p.wait(t, runTimeout); err != nil {
		t.Errorf("proxyd exited with %v after SIGTERM, want 0\nstderr:\n%s", err, p.stderr)
	}
	if _, err := os.Stat(e.Socket); !os.IsNotExist(err) {
		t.Errorf("socket still there after SIGTERM (stat: %v)", err)
	}
	// The record of the call made before the signal was flushed.
	e.startProxyd()
	found := false
	for _, rec := range e.activityRecords() {
		found = found || rec.Tool == "echo"
	}
	if !found {
		t.Errorf("the call made before SIGTERM is not in the activity log")
	}
}

// TestOtherUserCannotUseSocket opens the socket's file permissions to
// everyone and connects as another user: the daemon's peer-uid check must
// still refuse. It needs root to switch users.
func TestOtherUserCannotUseSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	const nobody = 65534
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	e.startProxyd()

	// A copy of mcpx the other user may execute.
	binDir, err := os.MkdirTemp("/tmp", "mcpx-e2e-other-")
	if err != nil {
		t.Fatalf("creating a bin dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	bin := filepath.Join(binDir, "mcpx")
	copyFile(t, mcpxBin, bin, 0o755)
	for path, mode := range map[string]os.FileMode{binDir: 0o755, e.dir: 0o755, filepath.Dir(e.Socket): 0o777, e.Socket: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatalf("chmod %s: %v", path, err)
		}
	}
	for _, dir := range []string{filepath.Dir(binDir)} {
		if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by other users; cannot run the other user's client", dir)
		}
	}
	for _, args := range [][]string{{"status"}, {"connect-info", "-o", "json"}, {"call", "x", "y"}} {
		cmd := exec.Command(bin, append([]string{"--socket", e.Socket}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "NO_COLOR=1"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("mcpx %v as uid %d succeeded:\n%s", args, nobody, out)
			continue
		}
		if msg := strings.ToLower(string(out)); !strings.Contains(msg, "only the user") && !strings.Contains(msg, "forbidden") {
			t.Errorf("mcpx %v as uid %d: want a refusal by the peer-uid check, got %v:\n%s", args, nobody, err, out)
		}
		if strings.Contains(string(out), "Bearer ") {
			t.Errorf("mcpx %v as uid %d got the bearer token", args, nobody)
		}
	}
	// The owner still gets in.
	e.mustRun("status")
}

// activityRecords returns `mcpx activity -o json`.
func (e *env) activityRecords() []activityRecord {
	e.t.Helper()
	var recs []activityRecord
	e.runJSON(0, &recs, "activity", "--limit", "1000")
	return recs
}

type activityRecord struct {
	ID          int64  `json:"id"`
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	Status      string `json:"status"`
	RequestID   string `json:"request_id"`
	ErrorClass  string `json:"error_class"`
	FaultDomain string `json:"fault_domain"`
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatalf("opening %s: %v", from, err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatalf("creating %s: %v", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatalf("copying %s: %v", from, err)
	}
	if err := out.Close(); err != nil {
		t.Fatalf("closing %s: %v", to, err)
	}
}

// TestSocketRefusesBrowsers: no browser may drive the daemon, so requests
// with an Origin or Referer are refused even from the owner.
func TestSocketRefusesBrowsers(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("listen: 127.0.0.1:0\n")
	e.startProxyd()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.Socket)
		},
	}}
	tests := []struct {
		name   string
		header string
		value  string
		want   int
	}{
		{name: "plain", want: http.StatusOK},
		{name: "origin", header: "Origin", value: "http://evil.example.com", want: http.StatusForbidden},
		{name: "loopback origin", header: "Origin", value: "http://127.0.0.1:8080", want: http.StatusForbidden},
		{name: "referer", header: "Referer", value: "http://evil.example.com/page", want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api.Host+"/v1/connect-info", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set(tc.header, tc.value)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("GET over the socket: %v", err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want != http.StatusOK && strings.Contains(string(body), "Bearer") {
				t.Errorf("a refused request got the bearer: %s", body)
			}
		})
	}
}
