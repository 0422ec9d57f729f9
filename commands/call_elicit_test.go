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

// An answer typed at a field is checked against what the requested
// schema says of it, and sent as valid JSON whatever Go would read.
func TestParseFieldChecks(t *testing.T) {
	num := func(v float64) *float64 { return &v }
	count := func(n int) *int { return &n }
	colors := field{Type: "array", Items: &struct {
		Enum  []string `json:"enum"`
		AnyOf []choice `json:"anyOf"`
	}{Enum: []string{"red", "green", "blue", "black"}}, MaxItems: count(3), MinItems: count(1)}
	tests := []struct {
		name    string
		f       field
		typed   string
		want    string // the value sent, or "" when refused
		problem string
	}{
		{"integer in bounds", field{Type: "integer", Minimum: num(1), Maximum: num(100)}, "42", "42", ""},
		{"integer over the maximum", field{Type: "integer", Maximum: num(100)}, "500", "", "must be at most 100"},
		{"integer under the minimum", field{Type: "integer", Minimum: num(1)}, "0", "", "must be at least 1"},
		{"integer with a sign", field{Type: "integer"}, "+5", "5", ""},
		{"integer not whole", field{Type: "integer"}, "2.5", "", "not a valid integer"},
		{"integer in hex", field{Type: "integer"}, "0x10", "", "not a valid integer"},
		{"number NaN", field{Type: "number"}, "NaN", "", "not a valid number"},
		{"number infinite", field{Type: "number"}, "Inf", "", "not a valid number"},
		{"number", field{Type: "number"}, "2.50", "2.5", ""},
		{"string too short", field{Type: "string", MinLength: count(3)}, "ab", "", "at least 3 characters"},
		{"string too long", field{Type: "string", MaxLength: count(3)}, "abcd", "", "at most 3 characters"},
		{"string of runes", field{Type: "string", MaxLength: count(3)}, "äöü", `"äöü"`, ""},
		{"email", field{Type: "string", Format: "email"}, "ada@example.com", `"ada@example.com"`, ""},
		{"not an email", field{Type: "string", Format: "email"}, "x@", "", "not an email address"},
		{"uri", field{Type: "string", Format: "uri"}, "https://example.com/a", `"https://example.com/a"`, ""},
		{"not a uri", field{Type: "string", Format: "uri"}, "not a uri", "", "not a URI"},
		{"date", field{Type: "string", Format: "date"}, "2026-12-07", `"2026-12-07"`, ""},
		{"not a date", field{Type: "string", Format: "date"}, "not-a-date", "", "not a date"},
		{"date-time", field{Type: "string", Format: "date-time"}, "2026-12-07T10:00:00Z", `"2026-12-07T10:00:00Z"`, ""},
		{"choices within the bounds", colors, "1,3", `["red","blue"]`, ""},
		{"too many choices", colors, "1,2,3,4", "", "choose at most 3"},
		{"a choice twice", colors, "1,2,1", "", "red is chosen twice"},
		{"not a choice", colors, "9", "", "not one of the choices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values, _ := tt.f.choices()
			got, problem := parseField(tt.f, values, tt.typed)
			if string(got) != tt.want || tt.problem == "" && problem != "" || !strings.Contains(problem, tt.problem) {
				t.Errorf("parseField(%q) = %s, %q; want %s, %q", tt.typed, got, problem, tt.want, tt.problem)
			}
			if got != nil && !json.Valid(got) {
				t.Errorf("sent %s, which is not JSON", got)
			}
		})
	}
}

// A titled enum of the legacy form (enumNames) offers its titles, and an
// answer the Answer? prompt cannot read is asked again, not taken as a
// cancel.
func TestElicitLabelsAndRetries(t *testing.T) {
	values, labels := field{Type: "string", Enum: []string{"cat", "dog"}, EnumNames: []string{"Cats", "Dogs"}}.choices()
	if strings.Join(values, ",") != "cat,dog" || strings.Join(labels, ",") != "Cats,Dogs" {
		t.Errorf("choices = %v, %v", values, labels)
	}
	params := `{"message":"Pet?","requestedSchema":{"type":"object","properties":{"pet":{"type":"string","enum":["cat","dog"],"enumNames":["Cats","Dogs"]}}}}`
	a := &elicitAnswerer{interactive: true, in: newLineSource(strings.NewReader("yse\ny\n2\n")), out: io.Discard}
	got, err := a.answer(context.Background(), json.RawMessage(params))
	if err != nil || string(got) != `{"action":"accept","content":{"pet":"dog"}}` {
		t.Errorf("answer = %s, %v", got, err)
	}
}
