package upstream

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/internal/syncbuf"
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
