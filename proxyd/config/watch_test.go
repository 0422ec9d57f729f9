package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type loaded struct {
	c   *Config
	err error
}

func TestWatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcpx")
	p := filepath.Join(dir, "config.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan loaded, 16)
	done, err := Watch(ctx, p, func(c *Config, err error) { got <- loaded{c, err} })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("watcher did not stop")
		}
	}()
	next := func(t *testing.T) loaded {
		t.Helper()
		select {
		case l := <-got:
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no reload within 5s")
			return loaded{}
		}
	}

	steps := []struct {
		name    string
		write   func() error
		servers int
		wantErr bool
	}{
		{"created by AddServer", func() error { return AddServer(p, Server{Name: "a", Command: "x"}) }, 1, false},
		// The same bytes again must not reload; the step after proves it,
		// since the next reload seen has that step's content.
		{"rewritten unchanged, then added", func() error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				return err
			}
			return AddServer(p, Server{Name: "b", Command: "y"})
		}, 2, false},
		{"broken by hand", func() error { return os.WriteFile(p, []byte("servers: [\n"), 0o600) }, 0, true},
		{"removed", func() error { return os.Remove(p) }, 0, false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.write(); err != nil {
				t.Fatal(err)
			}
			l := next(t)
			if (l.err != nil) != st.wantErr {
				t.Fatalf("reload error = %v, want error %v", l.err, st.wantErr)
			}
			if l.err == nil && len(l.c.Servers) != st.servers {
				t.Errorf("reloaded %d servers, want %d", len(l.c.Servers), st.servers)
			}
		})
	}
}

// A file written in place a piece at a time is applied once whole, never
// half-written, even when the pieces parse on their own.
func TestWatchWaitsForAStableFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcpx")
	p := filepath.Join(dir, "config.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan loaded, 16)
	if _, err := Watch(ctx, p, func(c *Config, err error) { got <- loaded{c, err} }); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"servers:\n  - name: a\n    command: x\n", "  - name: b\n    command: y\n", "  - name: c\n    command: z\n"}
	// A slow writer: a pause between pieces longer than an editor's burst.
	tick := time.NewTicker(3 * watchDebounce)
	defer tick.Stop()
	for i, piece := range pieces {
		if i > 0 {
			<-tick.C
		}
		if _, err := f.WriteString(piece); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	select {
	case l := <-got:
		if l.err != nil || len(l.c.Servers) != len(pieces) {
			t.Fatalf("applied %v servers (err %v) of a file still being written; want all %d once written", namesOf(l.c), l.err, len(pieces))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the finished file was never applied")
	}
}

func namesOf(c *Config) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Name)
	}
	return out
}
