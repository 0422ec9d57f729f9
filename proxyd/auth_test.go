package proxyd

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// A server removed from the config, renamed or pointed elsewhere takes
// its grant out of the refresh coordinator.
func TestSyncGrantsDropsRemovedServers(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics(), db: db}
	d.initAuth()
	a := config.Server{Name: "a", URL: "https://a.example.test/mcp"}
	b := config.Server{Name: "b", URL: "https://b.example.test/mcp"}
	moved := config.Server{Name: "b", URL: "https://elsewhere.example.test/mcp"}
	registered := func(s config.Server) bool { return d.auth.coord.Status(serverKey(s)).Server != "" }

	d.syncGrants([]config.Server{a, b})
	if !registered(a) || !registered(b) {
		t.Fatal("grants not registered")
	}
	d.syncGrants([]config.Server{moved})
	for _, s := range []config.Server{a, b} {
		if registered(s) {
			t.Errorf("%s (%s) is still refreshed after it left the config", s.Name, s.URL)
		}
	}
	if !registered(moved) {
		t.Error("the re-pointed server has no grant entry")
	}
}
