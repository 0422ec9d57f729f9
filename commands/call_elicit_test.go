package commands

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// schema is a requested schema like server-everything's, trimmed.
const elicitParams = `{"message":"Please provide inputs","requestedSchema":{"type":"object","properties":{
	"name":{"title":"String","type":"string","description":"Your full, legal name"},
	"check":{"type":"boolean"},
	"integer":{"type":"integer","default":42},
	"friend":{"type":"string","enum":["Monica","Rachel","Joey"],"default":"Monica"},
	"hero":{"type":"string","oneOf":[{"const":"hero-1","title":"Superman"},{"const":"hero-2","title":"Green Lantern"}]},
	"fish":{"type":"array","items":{"anyOf":[{"const":"fish-1","title":"Tuna"},{"const":"fish-2","title":"Salmon"}]}}
	},"required":["name"]}}`

func TestElicitAnswers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a.json")
	if err := os.WriteFile(file, []byte(`{"name":"Ada"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, policy, typed string
		interactive         bool
		want                string
	}{
		{"decline", "decline", "", false, `{"action":"decline"}`},
		{"cancel", "cancel", "", false, `{"action":"cancel"}`},
		{"file content", "@" + file, "", false, `{"action":"accept","content":{"name":"Ada"}}`},
		{"defaults miss a required field", "defaults", "", false, `{"action":"cancel"}`},
		{"nobody to ask", "", "", false, `{"action":"cancel"}`},
		{"typed per field", "", "y\nGrace\nmaybe\nn\n\n2\n1\n1,2\n", true,
			`{"action":"accept","content":{"check":false,"fish":["fish-1","fish-2"],"friend":"Rachel","hero":"hero-1","integer":42,"name":"Grace"}}`},
		{"required field retried", "", "\n\nAda\n\n\n\n\n\n", true,
			`{"action":"accept","content":{"friend":"Monica","integer":42,"name":"Ada"}}`},
		{"declined at the terminal", "", "d\n", true, `{"action":"decline"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &elicitAnswerer{policy: tt.policy, interactive: tt.interactive, in: newLineSource(strings.NewReader(tt.typed)), out: io.Discard}
			if path, ok := strings.CutPrefix(tt.policy, "@"); ok {
				var err error
				if a.file, err = readElicitFile(path); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.answer(context.Background(), json.RawMessage(elicitParams))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tt.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("answer %s, want %s", gb, wb)
			}
		})
	}
}

// --elicit @FILE is read and checked before the call: what is wrong
// with it is said naming the file and the shape it must have.
func TestElicitFileChecked(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "missing.json"), "no such file or directory; give a file holding a JSON object"},
		{"not JSON", write("bad.json", "not json"), "is not valid JSON (at byte 2); it must hold a JSON object"},
		{"empty", write("empty.json", ""), "is not valid JSON"},
		{"an array", write("array.json", "[1,2]"), "holds a JSON array; it must hold a JSON object"},
		{"an unknown action", write("maybe.json", `{"action":"maybe"}`), `"action" must be "accept", "decline" or "cancel", not "maybe"`},
		{"content not an object", write("content.json", `{"action":"accept","content":"Ada"}`), `"content" is a JSON string`},
		{"content with a decline", write("decline.json", `{"action":"decline","content":{}}`), "a decline answer has no \"content\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readElicitFile(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("readElicitFile = %v, want it to name %s and say %q", err, tt.path, tt.want)
			}
			if strings.Contains(err.Error(), "Go value") {
				t.Errorf("the message speaks of Go: %v", err)
			}
		})
	}
	for body, want := range map[string]string{
		`{"name":"Ada"}`: `{"action":"accept","content":{"name":"Ada"}}`,
		`{"action":"accept","content":{"name":"Ada"}}`: `{"action":"accept","content":{"name":"Ada"}}`,
		`{"action":"cancel"}`:                          `{"action":"cancel"}`,
	} {
		got, err := readElicitFile(write("ok.json", body))
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", body, got, err, want)
		}
	}
}

// A prompt nobody answers stops waiting when its request for input ends
// (the call ended or was cancelled, the server withdrew the request), so
// mcpx call can exit; the terminal's next line goes to the next prompt.
func TestPromptEndsWithItsRequest(t *testing.T) {
	typed, typing := io.Pipe()
	defer typing.Close()
	a := &elicitAnswerer{interactive: true, in: newLineSource(typed), out: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.answer(ctx, json.RawMessage(elicitParams))
		done <- err
	}()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("answer = %v", err)
	}
	go func() { _, _ = io.WriteString(typing, "d\n") }()
	got, err := a.answer(context.Background(), json.RawMessage(elicitParams))
	if err != nil || string(got) != `{"action":"decline"}` {
		t.Fatalf("the next prompt's answer: %s, %v", got, err)
	}
}

func TestProgressBar(t *testing.T) {
	total := 4.0
	tests := []struct {
		p    api.ProgressEvent
		want string
	}{
		{api.ProgressEvent{Progress: 1, Total: &total, Message: "step"}, "[#···] 1/4 step"},
		{api.ProgressEvent{Progress: 4, Total: &total}, "[####] 4/4"},
		{api.ProgressEvent{Progress: 2.5}, "[····] 2.5"},
	}
	for _, tt := range tests {
		if got := progressBar(&tt.p, 4); got != tt.want {
			t.Errorf("progressBar(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}
