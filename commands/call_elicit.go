package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/mail"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// elicitation is an elicitation/create request of an upstream, as much as
// mcpx call needs to answer it.
type elicitation struct {
	Message         string          `json:"message"`
	Mode            string          `json:"mode"`
	URL             string          `json:"url"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

// field is one property of the requested schema.
type field struct {
	name        string
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Format      string          `json:"format"`
	Default     json.RawMessage `json:"default"`
	Enum        []string        `json:"enum"`
	EnumNames   []string        `json:"enumNames"` // the labels of Enum (the legacy titled enum)
	OneOf       []choice        `json:"oneOf"`
	Items       *struct {
		Enum  []string `json:"enum"`
		AnyOf []choice `json:"anyOf"`
	} `json:"items"`
	// The bounds the spec's primitive schemas may carry.
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MinLength *int     `json:"minLength"`
	MaxLength *int     `json:"maxLength"`
	MinItems  *int     `json:"minItems"`
	MaxItems  *int     `json:"maxItems"`
	required  bool
}

type choice struct {
	Const string `json:"const"`
	Title string `json:"title"`
}

// fields lists the schema's properties in the order the server gave them.
func (e elicitation) fields() []field {
	var required struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(e.RequestedSchema, &required)
	props, _ := relay.Member(e.RequestedSchema, "properties")
	var out []field
	relay.EachValue(props, func(k, v []byte) {
		key := string(k)
		var f field
		if json.Unmarshal(v, &f) != nil {
			return
		}
		f.name = key
		for _, r := range required.Required {
			if r == key {
				f.required = true
			}
		}
		out = append(out, f)
	})
	return out
}

// choices are the values a field takes from a list, with labels.
func (f field) choices() (values, labels []string) {
	switch {
	case len(f.Enum) > 0 && len(f.EnumNames) == len(f.Enum):
		return f.Enum, f.EnumNames
	case len(f.Enum) > 0:
		return f.Enum, f.Enum
	case len(f.OneOf) > 0:
		for _, c := range f.OneOf {
			values, labels = append(values, c.Const), append(labels, c.Title)
		}
	case f.Items != nil && len(f.Items.Enum) > 0:
		return f.Items.Enum, f.Items.Enum
	case f.Items != nil:
		for _, c := range f.Items.AnyOf {
			values, labels = append(values, c.Const), append(labels, c.Title)
		}
	}
	return values, labels
}

// elicitAnswerer answers elicitation requests for mcpx call: by the
// --elicit policy, or by asking the person at the terminal.
type elicitAnswerer struct {
	policy      string          // "", decline, cancel, defaults or @FILE
	file        json.RawMessage // @FILE's answer, read before the call
	interactive bool
	in          *lineSource
	out         io.Writer // prompts and notes (stderr)
}

// lineSource reads the terminal's lines on a goroutine of its own,
// started at the first prompt: a read of a terminal cannot be
// interrupted, and a prompt must stop waiting once its request for input
// ends (the call ended, timed out or was cancelled; the server withdrew
// the request).
type lineSource struct {
	r     *bufio.Reader
	once  sync.Once
	lines chan lineRead
}

type lineRead struct {
	line string
	err  error
}

func newLineSource(r io.Reader) *lineSource {
	return &lineSource{r: bufio.NewReader(r), lines: make(chan lineRead)}
}

// next is the next line typed, or ctx's error once ctx ends first.
func (s *lineSource) next(ctx context.Context) (string, error) {
	s.once.Do(func() {
		go func() {
			for {
				line, err := s.r.ReadString('\n')
				s.lines <- lineRead{line, err}
				if err != nil {
					for { // the input is over: every later read hears so
						s.lines <- lineRead{"", err}
					}
				}
			}
		}()
	})
	select {
	case l := <-s.lines:
		return l.line, l.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func action(a string) json.RawMessage { return json.RawMessage(`{"action":"` + a + `"}`) }

func accept(content map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
	return b
}

// answer returns the result for an elicitation/create with params; a
// prompt stops waiting when ctx ends.
func (a *elicitAnswerer) answer(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var e elicitation
	if err := json.Unmarshal(params, &e); err != nil {
		return nil, fmt.Errorf("reading the elicitation request: %w", err)
	}
	fmt.Fprintf(a.out, "The server asks: %s\n", redact.Control(e.Message))
	if e.Mode == "url" {
		fmt.Fprintf(a.out, "  at %s\n", redact.Control(e.URL))
	}
	switch {
	case a.policy == "decline" || a.policy == "cancel":
		fmt.Fprintf(a.out, "  answered %s (--elicit %s)\n", a.policy, a.policy)
		return action(a.policy), nil
	case a.file != nil:
		fmt.Fprintf(a.out, "  answered from %s\n", strings.TrimPrefix(a.policy, "@"))
		return a.file, nil
	case a.policy == "defaults":
		return a.defaults(e), nil
	case a.interactive:
		return a.ask(ctx, e)
	}
	fmt.Fprintf(a.out, "  answered cancel: nobody at a terminal to ask (answer with --elicit decline|cancel|defaults|@FILE)\n")
	return action("cancel"), nil
}

// elicitFileShape is what --elicit @FILE takes, said in each refusal.
const elicitFileShape = `a JSON object: the content ({"name":"Ada"}) or a whole answer ({"action":"accept","content":{...}}, {"action":"decline"} or {"action":"cancel"})`

// readElicitFile reads and checks an --elicit @FILE answer before the call
// starts, so a missing or malformed file is the caller's mistake, said at
// once, not an error sent to the upstream mid-call. It returns the
// result to answer with.
func readElicitFile(path string) (json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--elicit @%s: %w; give a file holding %s", path, errors.Unwrap(err), elicitFileShape)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		var se *json.SyntaxError
		where := ""
		if errors.As(err, &se) {
			where = fmt.Sprintf(" (at byte %d)", se.Offset)
		}
		return nil, fmt.Errorf("--elicit @%s is not valid JSON%s; it must hold %s", path, where, elicitFileShape)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("--elicit @%s holds a JSON %s; it must hold %s", path, jsonKind(v), elicitFileShape)
	}
	act, whole := m["action"]
	if !whole {
		var content map[string]json.RawMessage
		_ = json.Unmarshal(b, &content)
		return accept(content), nil
	}
	switch act {
	case "accept":
		if c, ok := m["content"]; ok {
			if _, isObject := c.(map[string]any); !isObject {
				return nil, fmt.Errorf("--elicit @%s: \"content\" is a JSON %s; it must be an object of the requested fields", path, jsonKind(c))
			}
		}
	case "decline", "cancel":
		if _, ok := m["content"]; ok {
			return nil, fmt.Errorf("--elicit @%s: a %s answer has no \"content\" (only accept does)", path, act)
		}
	default:
		return nil, fmt.Errorf("--elicit @%s: \"action\" must be \"accept\", \"decline\" or \"cancel\", not %s", path, compactJSON(act))
	}
	return json.RawMessage(b), nil
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// defaults accepts with the schema's defaults, or cancels when a required
// field has none.
func (a *elicitAnswerer) defaults(e elicitation) json.RawMessage {
	if e.Mode == "url" {
		fmt.Fprintf(a.out, "  answered cancel: a URL has no defaults (--elicit defaults)\n")
		return action("cancel")
	}
	content := map[string]json.RawMessage{}
	for _, f := range e.fields() {
		switch {
		case len(f.Default) > 0:
			content[f.name] = f.Default
		case f.required:
			fmt.Fprintf(a.out, "  answered cancel: the required field %q has no default (--elicit defaults)\n", f.name)
			return action("cancel")
		}
	}
	fmt.Fprintf(a.out, "  answered accept with the defaults (--elicit defaults)\n")
	return accept(content)
}

// ask asks the person at the terminal, field by field.
func (a *elicitAnswerer) ask(ctx context.Context, e elicitation) (json.RawMessage, error) {
	if e.Mode == "url" {
		return a.decide(ctx, "Open the URL; press Enter when done, or type d to decline, c to cancel: "), nil
	}
	if v := a.decide(ctx, "Answer? [Y]es, [d]ecline, [c]ancel: "); string(v) != string(action("accept")) {
		return v, nil
	}
	content := map[string]json.RawMessage{}
	for _, f := range e.fields() {
		v, err := a.askField(ctx, f)
		if err != nil {
			return action("cancel"), nil
		}
		if v != nil {
			content[f.name] = v
		}
	}
	return accept(content), nil
}

// decide asks question until the answer is accept (Enter), decline or
// cancel; a prompt that ends, or three answers it cannot read, cancel.
func (a *elicitAnswerer) decide(ctx context.Context, question string) json.RawMessage {
	for range 3 {
		line, err := a.prompt(ctx, question)
		if err != nil {
			return action("cancel")
		}
		if v, ok := verdict(line); ok {
			return v
		}
		fmt.Fprintln(a.out, "  answer y (or Enter) to accept, d to decline, c to cancel")
	}
	fmt.Fprintln(a.out, "  answered cancel: no answer it could read")
	return action("cancel")
}

// verdict reads a y/d/c answer ("" accepts); false when it is none.
func verdict(line string) (json.RawMessage, bool) {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "d", "decline", "n", "no":
		return action("decline"), true
	case "c", "cancel":
		return action("cancel"), true
	case "", "y", "yes", "a", "accept":
		return action("accept"), true
	}
	return nil, false
}

func (a *elicitAnswerer) prompt(ctx context.Context, text string) (string, error) {
	fmt.Fprint(a.out, text)
	line, err := a.in.next(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(a.out) // the prompt's line stays unanswered
		return "", ctx.Err()
	}
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// askField asks for one field until the answer fits (or, for an optional
// field, is left empty); nil leaves the field out.
func (a *elicitAnswerer) askField(ctx context.Context, f field) (json.RawMessage, error) {
	label := f.name
	if f.Title != "" {
		label = f.Title + " (" + f.name + ")"
	}
	fmt.Fprintf(a.out, "%s", redact.Control(label))
	if f.Description != "" {
		fmt.Fprintf(a.out, ": %s", redact.Control(f.Description))
	}
	fmt.Fprintln(a.out)
	values, labels := f.choices()
	for i, l := range labels {
		fmt.Fprintf(a.out, "  %d) %s\n", i+1, redact.Control(l))
	}
	hint := f.Type
	if f.Format != "" {
		hint += ", " + f.Format
	}
	if f.Type == "array" {
		hint = "numbers or values, comma-separated"
	}
	if f.Type == "boolean" {
		hint = "y/n"
	}
	def := ""
	if len(f.Default) > 0 {
		def = " [" + redact.Control(string(f.Default)) + "]"
	}
	for tries := 0; tries < 3; tries++ {
		line, err := a.prompt(ctx, fmt.Sprintf("  %s%s: ", hint, def))
		if err != nil {
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			if len(f.Default) > 0 {
				return f.Default, nil
			}
			if !f.required {
				return nil, nil
			}
			fmt.Fprintln(a.out, "  this field is required")
			continue
		}
		v, problem := parseField(f, values, line)
		if problem == "" {
			return v, nil
		}
		fmt.Fprintf(a.out, "  %s\n", problem)
	}
	return nil, fmt.Errorf("no valid answer for %s", f.name)
}

// parseField reads an answer for f (values: the choices, if any).
func parseField(f field, values []string, line string) (json.RawMessage, string) {
	pick := func(s string) (string, bool) {
		s = strings.TrimSpace(s)
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(values) {
			return values[n-1], true
		}
		for _, v := range values {
			if v == s {
				return v, true
			}
		}
		return "", false
	}
	notOne := fmt.Sprintf("not one of the choices: give its number or value (1-%d)", len(values))
	switch {
	case f.Type == "array":
		var picked []string
		for _, part := range strings.Split(line, ",") {
			v, ok := pick(part)
			if !ok {
				return nil, notOne
			}
			if slices.Contains(picked, v) {
				return nil, fmt.Sprintf("%s is chosen twice", v)
			}
			picked = append(picked, v)
		}
		if f.MinItems != nil && len(picked) < *f.MinItems {
			return nil, fmt.Sprintf("choose at least %d", *f.MinItems)
		}
		if f.MaxItems != nil && len(picked) > *f.MaxItems {
			return nil, fmt.Sprintf("choose at most %d", *f.MaxItems)
		}
		b, _ := json.Marshal(picked)
		return b, ""
	case len(values) > 0:
		v, ok := pick(line)
		if !ok {
			return nil, notOne
		}
		b, _ := json.Marshal(v)
		return b, ""
	case f.Type == "boolean":
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			return json.RawMessage("true"), ""
		case "n", "no", "false":
			return json.RawMessage("false"), ""
		}
		return nil, "answer y or n"
	case f.Type == "integer" || f.Type == "number":
		// Re-encoded, so that what Go reads and JSON does not ("+5",
		// "0x10", "NaN") never reaches the server as written.
		var n float64
		var out string
		if f.Type == "integer" {
			i, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				return nil, "not a valid integer"
			}
			n, out = float64(i), strconv.FormatInt(i, 10)
		} else {
			var err error
			if n, err = strconv.ParseFloat(line, 64); err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
				return nil, "not a valid number"
			}
			out = strconv.FormatFloat(n, 'g', -1, 64)
		}
		if f.Minimum != nil && n < *f.Minimum {
			return nil, fmt.Sprintf("must be at least %v", *f.Minimum)
		}
		if f.Maximum != nil && n > *f.Maximum {
			return nil, fmt.Sprintf("must be at most %v", *f.Maximum)
		}
		return json.RawMessage(out), ""
	}
	if n := utf8.RuneCountInString(line); f.MinLength != nil && n < *f.MinLength {
		return nil, fmt.Sprintf("must be at least %d characters", *f.MinLength)
	} else if f.MaxLength != nil && n > *f.MaxLength {
		return nil, fmt.Sprintf("must be at most %d characters", *f.MaxLength)
	}
	if why := badFormat(f.Format, line); why != "" {
		return nil, why
	}
	b, _ := json.Marshal(line)
	return b, ""
}

// badFormat says why s is not of format (a string format the spec's
// schemas name); "" when it is, or the format is one mcpx call does not
// check.
func badFormat(format, s string) string {
	switch format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return "not an email address (name@example.com)"
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" || u.Host == "" && u.Opaque == "" && u.Path == "" {
			return "not a URI (https://example.com/page)"
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return "not a date (2006-01-02)"
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return "not a date and time (2006-01-02T15:04:05Z)"
		}
	}
	return ""
}
