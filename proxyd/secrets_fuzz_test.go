package proxyd

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Canaries configured as secrets (a stdio env value, a header value, a
// client secret) never survive redaction, wherever in the text they sit
// and whatever surrounds them: in shown text, in errors, in log lines.
func FuzzSecretsNeverSurvive(f *testing.F) {
	const env, header, client = "canary-env-4e1f9a", "canary-hdr-7c2b", "canary-cs-91d0"
	cfg := &config.Config{Servers: []config.Server{
		{Name: "local", Command: "x", Env: map[string]string{"API_TOKEN": env, "LOG_LEVEL": "warn"}},
		{Name: "remote", URL: "https://x.example/mcp", Headers: map[string]string{"X-Api-Key": header},
			OAuth: &config.OAuth{ClientID: "c", ClientSecret: client}},
	}}
	var s secrets
	s.use(cfg)
	for _, seed := range []struct{ before, after string }{
		{"starting with API_TOKEN=", "\n"},
		{`{"error":"bad key `, `"}`},
		{"\x1b[31m", "\x1b[0m"},
		{"%22", "%22"},
		{"", ""},
	} {
		f.Add(seed.before, seed.after, uint8(0))
	}
	f.Fuzz(func(t *testing.T, before, after string, which uint8) {
		canary := []string{env, header, client}[int(which)%3]
		text := before + canary + after
		var buf bytes.Buffer
		log := slog.New(redactingHandler{next: slog.NewTextHandler(&buf, nil), s: &s})
		log.Info(text, "err", errors.New(text), "line", text)
		for where, out := range map[string]string{
			"text": s.text(text), "error": s.err(errors.New(text)).Error(), "log": buf.String(),
		} {
			if strings.Contains(out, canary) {
				t.Fatalf("%s: the canary survived in %q", where, out)
			}
		}
	})
}
