package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func serverNames(t *testing.T, path string) []string {
	t.Helper()
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load after edit: %v\n%s", err, readFile(t, path))
	}
	var names []string
	for _, s := range c.Servers {
		names = append(names, s.Name)
	}
	return names
}

const commented = `# mcpx configuration
listen: 127.0.0.1:7000 # fixed port for the IDE

servers:
  # the docs server
  - name: docs
    url: https://example.com/mcp   # production
    headers:
      X-Team: infra
  - name: local
    command: ./server   # built by make
# trailing note
`

func TestAddRemoveRoundTripKeepsComments(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, p, commented)

	everything := Server{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"LOG_LEVEL": "warn"}}
	if err := AddServer(p, everything); err != nil {
		t.Fatalf("AddServer: %v", err)
	}
	after := readFile(t, p)
	if !strings.HasPrefix(after, strings.TrimSuffix(commented, "# trailing note\n")) {
		t.Errorf("AddServer changed existing text:\n%s", after)
	}
	if got := fmt.Sprint(serverNames(t, p)); got != "[docs local everything]" {
		t.Errorf("servers after add = %s", got)
	}
	c, _ := Load(p)
	if s, _ := c.Server("everything"); s.Env["LOG_LEVEL"] != "warn" || len(s.Args) != 2 {
		t.Errorf("added server reads back as %+v", s)
	}

	if err := RemoveServer(p, "everything"); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	if got := readFile(t, p); got != commented {
		t.Errorf("add then remove is not the original file:\n%s", got)
	}

	if err := RemoveServer(p, "docs"); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	got := readFile(t, p)
	for _, keep := range []string{"# mcpx configuration", "# fixed port for the IDE", "# built by make", "# trailing note"} {
		if !strings.Contains(got, keep) {
			t.Errorf("comment %q lost:\n%s", keep, got)
		}
	}
	if strings.Contains(got, "example.com") {
		t.Errorf("removed server still in file:\n%s", got)
	}
	if names := serverNames(t, p); fmt.Sprint(names) != "[local]" {
		t.Errorf("servers after remove = %v", names)
	}
}

func TestEditErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	writeFile(t, p, commented)
	tests := []struct {
		name string
		edit func() error
		is   error  // errors.Is target, or nil
		msg  string // substring
	}{
		{"remove unknown", func() error { return RemoveServer(p, "nope") }, ErrNotFound, `"nope"`},
		{"disable unknown", func() error { return SetServerDisabled(p, "nope", true) }, ErrNotFound, `"nope"`},
		{"add duplicate", func() error { return AddServer(p, Server{Name: "docs", URL: "https://x/mcp"}) }, ErrExists, `"docs"`},
		{"add invalid", func() error { return AddServer(p, Server{Name: "bad_name", URL: "https://x/mcp"}) }, nil, "invalid server name"},
		{"add authorization header", func() error {
			return AddServer(p, Server{Name: "h", URL: "https://x/mcp", Headers: map[string]string{"Authorization": "Bearer x"}})
		}, nil, "holds a credential written into the config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.edit()
			if err == nil {
				t.Fatal("edit succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), "Bearer x") {
				t.Errorf("error echoes a header value: %v", err)
			}
			if got := readFile(t, p); got != commented {
				t.Errorf("failed edit changed the file:\n%s", got)
			}
		})
	}
}

func TestEditRefusesBrokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	broken := "servers:\n  - name: a\n    comand: x\n"
	writeFile(t, p, broken)
	err := AddServer(p, Server{Name: "b", Command: "y"})
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 3 {
		t.Fatalf("AddServer on a broken file = %v", err)
	}
	if readFile(t, p) != broken {
		t.Error("broken file was rewritten")
	}
}

func TestSetServerDisabled(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		server   string
		disabled bool
		want     string
	}{
		{"insert after name", "servers:\n  - name: a # A\n    command: x\n", "a", true,
			"servers:\n  - name: a # A\n    disabled: true\n    command: x\n"},
		{"flip existing keeps comment", "servers:\n  - name: a\n    command: x\n    disabled: false # why\n", "a", true,
			"servers:\n  - name: a\n    command: x\n    disabled: true # why\n"},
		{"enable drops a bare line", "servers:\n  - name: a\n    disabled: true\n    command: x\n", "a", false,
			"servers:\n  - name: a\n    command: x\n"},
		{"enable keeps a commented line", "servers:\n  - name: a\n    disabled: true # flaky\n    command: x\n", "a", false,
			"servers:\n  - name: a\n    disabled: false # flaky\n    command: x\n"},
		{"unchanged is a no-op", "servers:\n  - {name: a, command: x}   # flow\n", "a", false,
			"servers:\n  - {name: a, command: x}   # flow\n"},
		{"second of two, unindented list", "servers:\n- name: a\n  command: x\n- name: b\n  command: y\n", "b", true,
			"servers:\n- name: a\n  command: x\n- name: b\n  disabled: true\n  command: y\n"},
		{"crlf", "servers:\r\n  - name: a\r\n    command: x\r\n", "a", true,
			"servers:\r\n  - name: a\r\n    disabled: true\r\n    command: x\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.yaml")
			writeFile(t, p, tt.in)
			if err := SetServerDisabled(p, tt.server, tt.disabled); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, p); got != tt.want {
				t.Errorf("file =\n%q\nwant\n%q", got, tt.want)
			}
			c, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := c.Server(tt.server); s.Disabled != tt.disabled {
				t.Errorf("Disabled = %v", s.Disabled)
			}
		})
	}
}

func TestAddServerLayouts(t *testing.T) {
	s := Server{Name: "new", URL: "https://example.com/mcp"}
	entry := "  - name: new\n    url: https://example.com/mcp\n"
	tests := []struct {
		name string
		in   string // "" with create: file absent
		want string // "" to check only that the result loads
	}{
		{"missing file", "", "servers:\n" + entry},
		{"comments only", "# hello\n", "# hello\nservers:\n" + entry},
		{"no servers key, no final newline", "listen: 127.0.0.1:1", "listen: 127.0.0.1:1\nservers:\n" + entry},
		{"null servers with comment", "servers: # none yet\n# end\n", "servers: # none yet\n" + entry + "# end\n"},
		{"explicit null", "servers: null\n", "servers:\n" + entry},
		{"empty flow list", "servers: []\nlisten: 127.0.0.1:1\n", "servers:\n" + entry + "listen: 127.0.0.1:1\n"},
		{"after last entry, before next key", "servers:\n  - name: a\n    command: x\n\nlisten: 127.0.0.1:1\n", "servers:\n  - name: a\n    command: x\n" + entry + "\nlisten: 127.0.0.1:1\n"},
		{"flow list falls back to re-encoding", "servers: [{name: a, command: x}]\n", ""},
		{"flow top level falls back", "{servers: [{name: a, command: x}], listen: \"127.0.0.1:1\"}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.yaml")
			if tt.in != "" {
				writeFile(t, p, tt.in)
			}
			if err := AddServer(p, s); err != nil {
				t.Fatal(err)
			}
			if tt.want != "" {
				if got := readFile(t, p); got != tt.want {
					t.Errorf("file =\n%q\nwant\n%q", got, tt.want)
				}
			}
			names := serverNames(t, p)
			if len(names) == 0 || names[len(names)-1] != "new" {
				t.Errorf("servers = %v\n%s", names, readFile(t, p))
			}
		})
	}
}

func TestRemoveServerLayouts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" to check only the loaded result
	}{
		{"middle of three", "servers:\n  - name: a\n    command: x\n  - name: b\n    command: y\n  - name: c\n    command: z\n",
			"servers:\n  - name: a\n    command: x\n  - name: c\n    command: z\n"},
		{"nested blocks", "servers:\n  - name: b\n    command: y\n    args:\n      - one\n    env:\n      A: |\n        multi\n        line\n  - name: a\n    command: x\nlisten: 127.0.0.1:1\n",
			"servers:\n  - name: a\n    command: x\nlisten: 127.0.0.1:1\n"},
		{"only entry", "servers:\n  - name: b\n    command: y\n", "servers:\n"},
		{"flow list falls back", "servers: [{name: b, command: y}, {name: a, command: x}]\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.yaml")
			writeFile(t, p, tt.in)
			if err := RemoveServer(p, "b"); err != nil {
				t.Fatal(err)
			}
			if tt.want != "" {
				if got := readFile(t, p); got != tt.want {
					t.Errorf("file =\n%q\nwant\n%q", got, tt.want)
				}
			}
			for _, n := range serverNames(t, p) {
				if n == "b" {
					t.Errorf("b still present:\n%s", readFile(t, p))
				}
			}
		})
	}
}

func TestAtomicWriteMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh", "mcpx")
	p := filepath.Join(dir, "config.yaml")
	if err := AddServer(p, Server{Name: "a", Command: "x"}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("config mode = %v, want 0600", fi.Mode().Perm())
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("directory holds %d entries, want only the config (temp file left?)", len(entries))
		}
	}
	check()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	// A file the user left world-readable is tightened on the next write.
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetServerDisabled(p, "a", true); err != nil {
		t.Fatal(err)
	}
	check()
}

func TestEditFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "mcpx.yaml")
	if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, real, "servers: []\n")
	link := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := AddServer(link, Server{Name: "a", Command: "x"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink replaced by a file")
	}
	if !strings.Contains(readFile(t, real), "name: a") {
		t.Errorf("target not updated:\n%s", readFile(t, real))
	}
}

func TestConcurrentAdds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- AddServer(p, Server{Name: fmt.Sprintf("s%d", i), Command: "x"})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if names := serverNames(t, p); len(names) != n {
		t.Errorf("servers = %v, want %d", names, n)
	}
}
