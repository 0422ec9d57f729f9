package commands

import (
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestNextStep: the command status suggests fits the server: probe only
// for a server with a URL, set-token beside login for sign-in.
func TestNextStep(t *testing.T) {
	tests := []struct {
		s    api.ServerStatus
		want string
		not  string
	}{
		{s: api.ServerStatus{Name: "gh", State: api.StateError, Transport: "streamable-http", LastError: "the server requires sign-in (HTTP 401)"},
			want: "mcpx auth set-token gh"},
		{s: api.ServerStatus{Name: "local", State: api.StateConnecting, Transport: "stdio"}, want: "run its command by hand", not: "probe"},
		{s: api.ServerStatus{Name: "local", State: api.StateError, Transport: "stdio"}, want: "check the command", not: "probe"},
		{s: api.ServerStatus{Name: "docs", State: api.StateConnecting, Transport: "streamable-http"}, want: "mcpx probe docs"},
		{s: api.ServerStatus{Name: "docs", State: api.StateReady, Transport: "streamable-http"}, want: "mcpx tools docs"},
	}
	for _, tt := range tests {
		got := nextStep(&tt.s)
		if !strings.Contains(got, tt.want) || tt.not != "" && strings.Contains(got, tt.not) {
			t.Errorf("%s (%s, %s): %q, want %q without %q", tt.s.Name, tt.s.State, tt.s.Transport, got, tt.want, tt.not)
		}
	}
}
