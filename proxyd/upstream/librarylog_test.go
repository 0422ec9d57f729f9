package upstream

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// The MCP library's lines reach proxyd's log from warnings up, at the
// level proxyd gives the errors it handles itself.
func TestLibraryLogLevels(t *testing.T) {
	tests := []struct {
		level slog.Level
		msg   string
		want  string // the level logged; "" for none
	}{
		{slog.LevelInfo, "listening to server forever", ""},
		{slog.LevelError, "SSE stream error", ""},
		{slog.LevelError, "failed to listen to server. retry in 1 second", "WARN"},
		{slog.LevelError, "failed to send close request", ""},
		{slog.LevelError, "server does not support listening", ""},
		{slog.LevelError, "session terminated, stopping listener", "WARN"},
		{slog.LevelError, "panic in SSE stream reader", "ERROR"},
		{slog.LevelWarn, "something the library warns of", "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			out := &syncbuf.Buffer{}
			o := Options{Logger: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			o.libraryLogger("fx").Log(t.Context(), tt.level, tt.msg, "err", "boom")
			got := out.String()
			switch {
			case tt.want == "" && got != "":
				t.Fatalf("logged %q, want nothing", got)
			case tt.want != "" && (!strings.Contains(got, "level="+tt.want) || !strings.Contains(got, "server=fx") || !strings.Contains(got, "err=boom")):
				t.Fatalf("logged %q, want level=%s with the server and the error", got, tt.want)
			}
		})
	}
}

// A legacy server that goes away and comes back is a lost connection and
// a new one in proxyd's log, with no error line: the library's own lines
// for it (the GET stream refused, the session's DELETE failing) are
// routine there.
func TestLegacyServerLostLogsNoError(t *testing.T) {
	logs := &syncbuf.Buffer{}
	fx := startFixture(t, mcpserver.EraLegacy)
	u, err := url.Parse(fx.URL())
	if err != nil {
		t.Fatal(err)
	}
	cut := startCutter(t, u.Host)
	u.Host = cut.Addr()
	m := newManagerWith(t, Options{Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))},
		config.Server{Name: "fx", URL: u.String(), Protocol: config.ProtocolLegacy})
	c, _ := m.Get("fx")
	waitState(t, c, api.StateReady)
	cut.Down()
	waitState(t, c, api.StateError)
	if err := cut.Up(); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, api.StateReady)
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "upstream connection lost") {
		t.Fatalf("want the loss logged and no error line:\n%s", out)
	}
}
