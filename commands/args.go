package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
)

// normalizeArgs lets flags stand before or after positional arguments and
// global flags stand after the command, which urfave/cli v2 does not do by
// itself. It moves global flags to the front and, for the command being
// run, its flags ahead of its positionals. "--" still ends the flags.
func normalizeArgs(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		// Completion reads its marker from the very end: leave it be.
		return args
	}
	globals, rest := extractFlags(args[1:], app.Flags, false)
	out := append([]string{args[0]}, globals...)
	cmds := app.Commands
	for len(rest) > 0 {
		// Walk down the command tree while the next word names a command.
		cmd := findCommand(cmds, rest[0])
		if cmd == nil {
			break
		}
		out = append(out, rest[0])
		rest = rest[1:]
		if len(cmd.Subcommands) > 0 {
			// Flags written before a subcommand belong to the parent;
			// everything after it to the subcommand.
			if i := subcommandIndex(rest, cmd); i >= 0 {
				out = append(out, rest[:i]...)
				rest, cmds = rest[i:], cmd.Subcommands
				continue
			}
		}
		flags, pos := extractFlags(rest, cmd.Flags, true)
		out = append(out, flags...)
		if len(pos) > 0 {
			if strings.HasPrefix(pos[0], "-") {
				out = append(out, "--")
			}
			out = append(out, pos...)
		}
		return out
	}
	return append(out, rest...)
}

// subcommandIndex is the index in args of the first word that names one
// of cmd's subcommands, skipping cmd's own flags and their values; -1 when
// a positional that is not a subcommand comes first.
func subcommandIndex(args []string, cmd *cli.Command) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := lookupFlag(cmd.Flags, name); f != nil && takesValue(f) {
				i++
			}
			continue
		}
		if findCommand(cmd.Subcommands, a) != nil {
			return i
		}
		return -1
	}
	return -1
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

// extractFlags splits args into the tokens of the given flags (with their
// values) and everything else. With stopAtDashDash, "--" ends the flags and
// is dropped; without it, "--" and what follows stay in the rest.
func extractFlags(args []string, flags []cli.Flag, stopAtDashDash bool) (matched, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if stopAtDashDash {
				return matched, append(rest, args[i+1:]...)
			}
			return matched, append(rest, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		hasValue := false
		if eq := strings.IndexByte(name, '='); eq >= 0 {
			name, hasValue = name[:eq], true
		}
		f := lookupFlag(flags, name)
		if f == nil {
			if stopAtDashDash && !isNumber(a) {
				// Unknown: leave it where the parser will name it.
				matched = append(matched, a)
			} else {
				rest = append(rest, a)
			}
			continue
		}
		matched = append(matched, a)
		if !hasValue && takesValue(f) && i+1 < len(args) {
			matched = append(matched, args[i+1])
			i++
		}
	}
	return matched, rest
}

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	if v, ok := f.(cli.DocGenerationFlag); ok {
		return v.TakesValue()
	}
	return false
}

// parseHeaders reads repeatable --header K:V flags (for servers add and
// probe). A value is usually a credential, so an error names the flag's
// position, never what was written.
func parseHeaders(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(flags))
	for i, h := range flags {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || !httpguts.ValidHeaderFieldName(k) {
			return nil, usageErr("--header #%d is not K:V (a header name, a colon, the value)", i+1)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// maxArgumentsFile bounds @FILE and stdin arguments.
const maxArgumentsFile = 16 << 20

// callArguments builds a tool's arguments object from the command line:
// one JSON object (inline, @FILE, or - for stdin), or KEY=VALUE pairs
// (positional or --arg) whose values are typed by the tool's input schema:
// a string property takes "123" as a string, a number property 123 as a
// number; keys the schema does not describe take JSON when it parses. A
// key given twice is an error. Every error is a usage error.
func callArguments(c *cli.Context, server, tool string, pos, flags []string) (json.RawMessage, error) {
	var types map[string][]string
	open := true // until the schema says otherwise: nothing to warn of
	raw, err := parseArguments(pos, flags, func() map[string][]string {
		types, open = toolProperties(c, server, tool)
		return types
	}, c.App.Reader)
	if err == nil && !open {
		warnUnknownArguments(c, tool, raw, types)
	}
	return raw, err
}

// warnUnknownArguments names on stderr the KEY=VALUE keys a tool's schema
// does not list (a typo: the tool would run on its defaults without a
// word), with the nearest it does; they are sent as given, for the schema
// allows them.
func warnUnknownArguments(c *cli.Context, tool string, raw json.RawMessage, types map[string][]string) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	warnUnknownKeys(c, tool, slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(types)))
}

// warnUnknownKeys names on stderr each of keys that known does not hold,
// with the nearest it does, for what (a tool, "prompt NAME") that is
// sent them as given.
func warnUnknownKeys(c *cli.Context, what string, keys, known []string) {
	takes := "it takes none"
	if len(known) > 0 {
		takes = "its arguments: " + strings.Join(known, ", ")
	}
	for _, k := range keys {
		if !slices.Contains(known, k) {
			errorf(c, "warning: %s has no argument %q%s (%s); sent as given\n", what, k, editdistance.DidYouMean(k, known), takes)
		}
	}
}

// parseArguments is callArguments with the schema's property types from
// props (asked once, only for KEY=VALUE pairs) and stdin for "-".
func parseArguments(pos, flags []string, props func() map[string][]string, stdin io.Reader) (json.RawMessage, error) {
	if jsonArgument(pos, flags) {
		raw, err := readJSONArgument(stdin, pos[0])
		if err != nil {
			return nil, exitErr(ExitUsage, err)
		}
		return raw, nil
	}
	pairs := append(append([]string{}, pos...), flags...)
	if len(pairs) == 0 {
		return nil, nil
	}
	var types map[string][]string
	schemaKnown := false
	m := map[string]json.RawMessage{}
	for _, kv := range pairs {
		if kv == "-" || strings.HasPrefix(kv, "@") || strings.HasPrefix(strings.TrimSpace(kv), "{") {
			return nil, usageErr("give arguments as one JSON object (inline, @FILE or -) or as KEY=VALUE pairs, not both")
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("argument %q is not KEY=VALUE (or pass one JSON object, @FILE or - for stdin)", kv)
		}
		if !utf8.ValidString(kv) {
			return nil, usageErr("argument %q is not valid UTF-8, which JSON cannot carry unchanged", kv)
		}
		if _, dup := m[k]; dup {
			return nil, usageErr("argument %q is given twice", k)
		}
		if !schemaKnown {
			types, schemaKnown = props(), true
		}
		m[k] = typedValue(v, types[k])
	}
	return json.Marshal(m)
}

// jsonArgument: the arguments are one JSON object (inline, @FILE or -),
// sent as written; KEY=VALUE pairs are typed and checked by the schema.
func jsonArgument(pos, flags []string) bool {
	return len(pos) == 1 && len(flags) == 0 && (pos[0] == "-" || strings.HasPrefix(pos[0], "@") || strings.HasPrefix(strings.TrimSpace(pos[0]), "{"))
}

// readJSONArgument reads the JSON object of an inline argument, @FILE or -.
func readJSONArgument(stdin io.Reader, a string) (json.RawMessage, error) {
	var raw []byte
	switch {
	case a == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, maxArgumentsFile+1))
		if err != nil {
			return nil, fmt.Errorf("reading the arguments from stdin: %w", err)
		}
		raw = b
		a = "on stdin"
	case strings.HasPrefix(a, "@"):
		f, err := os.Open(a[1:])
		if err != nil {
			return nil, fmt.Errorf("arguments file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxArgumentsFile+1))
		if err != nil {
			return nil, fmt.Errorf("arguments file: %w", err)
		}
		raw = b
		a = "in " + a[1:]
	default:
		raw = []byte(a)
		a = "given inline"
	}
	if len(raw) > maxArgumentsFile {
		return nil, fmt.Errorf("the arguments %s exceed %d MiB", a, maxArgumentsFile>>20)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("the arguments %s are not a JSON object: %v", a, err)
	}
	return json.RawMessage(bytes.TrimSpace(raw)), nil
}

// toolProperties maps each property of the tool's input schema to its JSON
// types, asking proxyd; empty when it cannot tell (proxyd down, an unknown
// tool: the call then says why). open: the schema may take keys it does
// not list as far as the command line can tell (it says so with
// additionalProperties, or lists none, or is unknown).
func toolProperties(c *cli.Context, server, tool string) (types map[string][]string, open bool) {
	tools, err := newClient(c).Tools(c.Context, server)
	if err != nil {
		return nil, true
	}
	for _, t := range tools {
		if (server == "" && t.Exposed == tool) || (server != "" && (t.Name == tool || t.Exposed == tool)) {
			types = schemaTypes(t.InputSchema)
			return types, len(types) == 0 || openSchema(t.InputSchema)
		}
	}
	return nil, true
}

// schemaTypes reads the top-level properties' "type" (a name or a list);
// a property without one takes any type (nil).
func schemaTypes(schema json.RawMessage) map[string][]string {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	out := map[string][]string{}
	for name, p := range s.Properties {
		var one string
		var many []string
		switch {
		case json.Unmarshal(p.Type, &one) == nil && one != "":
			out[name] = []string{one}
		case json.Unmarshal(p.Type, &many) == nil:
			out[name] = many
		default:
			out[name] = nil
		}
	}
	return out
}

// openSchema: the schema's additionalProperties takes keys it does not
// list (true, or a schema for them); absent or false, a key it does not
// list is most likely a typo.
func openSchema(schema json.RawMessage) bool {
	var s struct {
		Additional json.RawMessage `json:"additionalProperties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return true
	}
	a := strings.TrimSpace(string(s.Additional))
	return a != "" && a != "false" && a != "null"
}

// typedValue is v as JSON of one of types: a string stays a string when the
// property takes strings; otherwise v is read as JSON when it parses as a
// value of an allowed type (or of any type, when none is known).
func typedValue(v string, types []string) json.RawMessage {
	asString := func() json.RawMessage { b, _ := json.Marshal(v); return b }
	if slices.Contains(types, "string") {
		return asString()
	}
	var x any
	if v == "" || json.Unmarshal([]byte(v), &x) != nil {
		return asString()
	}
	if len(types) == 0 {
		return json.RawMessage(v)
	}
	got := jsonKind(x)
	if slices.Contains(types, got) || (got == "number" && slices.Contains(types, "integer")) {
		return json.RawMessage(v)
	}
	// Not of an allowed type: sent as a string, the schema check says why.
	return asString()
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
