package relay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestMembers(t *testing.T) {
	obj := []byte(` { "name" : "echo", "arguments": {"text": "a,}\"b", "n": [1, {"x": 2}]}, "_meta": {"progressToken": 7}, "esc\u0061ped": true } `)
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"name", `"echo"`, true},
		{"arguments", `{"text": "a,}\"b", "n": [1, {"x": 2}]}`, true},
		{"_meta", `{"progressToken": 7}`, true},
		{"escaped", `true`, true},
		{"text", "", false}, // not at the top level
		{"missing", "", false},
	}
	for _, tt := range tests {
		v, ok := Member(obj, tt.key)
		if ok != tt.ok || string(v) != tt.want {
			t.Errorf("Member(%q) = %q, %v; want %q, %v", tt.key, v, ok, tt.want, tt.ok)
		}
	}
	if _, ok := Member([]byte(`[1,2]`), "a"); ok {
		t.Error("a member of an array")
	}
	var keys []string
	EachValue(obj, func(k, v []byte) { keys = append(keys, string(k)) })
	if len(keys) != 4 || keys[3] != "escaped" {
		t.Errorf("EachValue keys %q", keys)
	}
}

func TestWithAndWithoutMember(t *testing.T) {
	tests := []struct {
		name, in, want string
		edit           func([]byte) []byte
	}{
		{"replace", `{"a":1,"b":2}`, `{"a":1,"b":"x"}`, func(b []byte) []byte { return WithMember(b, "b", []byte(`"x"`)) }},
		{"add", `{"a":1}`, `{"c":true,"a":1}`, func(b []byte) []byte { return WithMember(b, "c", []byte(`true`)) }},
		{"add to empty", `{ }`, `{"c":true }`, func(b []byte) []byte { return WithMember(b, "c", []byte(`true`)) }},
		{"remove middle", `{"a":1,"b":2,"c":3}`, `{"a":1,"c":3}`, func(b []byte) []byte { return WithoutMember(b, "b") }},
		{"remove last", `{"a":1, "b":2}`, `{"a":1}`, func(b []byte) []byte { return WithoutMember(b, "b") }},
		{"remove only", `{"b":{"x":[1]}}`, `{}`, func(b []byte) []byte { return WithoutMember(b, "b") }},
		{"remove absent", `{"a":1}`, `{"a":1}`, func(b []byte) []byte { return WithoutMember(b, "z") }},
		{"rewrite, drop after", `{"name":"a__x","arguments":{},"_meta":{"k":1}}`, `{"name":"x","arguments":{}}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "_meta") }},
		{"rewrite, drop before", `{"_meta":{}, "name":"a__x"}`, `{ "name":"x"}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "_meta") }},
		{"rewrite, drop next to it", `{"a":1,"name":"a__x" ,"_meta":{},"b":2}`, `{"a":1,"name":"x" ,"b":2}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "_meta") }},
		{"rewrite, nothing to drop", `{"name":"a__x"}`, `{"name":"x"}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "_meta") }},
		{"rewrite, nothing to set", `{"_meta":{},"a":1}`, `{"name":"x","a":1}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "_meta") }},
		{"rewrite, no drop", `{"name":"a__x","":1}`, `{"name":"x","":1}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "") }},
		{"rewrite, add, no drop", `{"":1}`, `{"name":"x","":1}`, func(b []byte) []byte { return Rewrite(b, "name", []byte(`"x"`), "") }},
		{"edit, nothing at all", `{"":1}`, `{"":1}`, func(b []byte) []byte { return (&Edit{}).Apply(b) }},
		{"edit, drop only", `{"uri":"a","_meta":{}}`, `{"uri":"a"}`, func(b []byte) []byte { return (&Edit{Drop: "_meta"}).Apply(b) }},
		{"edit, nothing to drop", `{"uri":"a"}`, `{"uri":"a"}`, func(b []byte) []byte { return (&Edit{Drop: "_meta"}).Apply(b) }},
		{"no edit", `{"uri":"a","_meta":{}}`, `{"uri":"a","_meta":{}}`, func(b []byte) []byte { return (*Edit)(nil).Apply(b) }},
		{"legacy result", `{"content":[],"resultType":"complete","isError":false}`, `{"content":[],"isError":false}`, func(b []byte) []byte { return LegacyResult(b) }},
		{"modern result", `{"content":[]}`, `{"resultType":"complete","content":[]}`, func(b []byte) []byte { return ModernResult(b) }},
		{"modern result kept", `{"resultType":"input_required"}`, `{"resultType":"input_required"}`, func(b []byte) []byte { return ModernResult(b) }},
	}
	for _, tt := range tests {
		got := tt.edit([]byte(tt.in))
		if string(got) != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: invalid JSON %s", tt.name, got)
		}
	}
}

func TestCaps(t *testing.T) {
	tests := []struct {
		raw                          string
		sampling, form, url, roots   bool
		acceptsURLElicit, acceptsAny bool
	}{
		{`{}`, false, false, false, false, false, false},
		{`{"sampling":{},"roots":{"listChanged":true}}`, true, false, false, true, false, false},
		{`{"elicitation":{}}`, false, true, false, false, false, true},
		{`{"elicitation":{"url":{}}}`, false, false, true, false, true, true},
		{`{"elicitation":{"form":{},"url":{}}}`, false, true, true, false, true, true},
	}
	for _, tt := range tests {
		c := ParseCaps(json.RawMessage(tt.raw))
		// Read again (the last declaration is kept): the same answer.
		if again := ParseCaps(json.RawMessage(tt.raw)); !reflect.DeepEqual(again, c) || string(c.Raw) != tt.raw {
			t.Errorf("ParseCaps(%s) = %+v, then %+v", tt.raw, c, again)
		}
		if c.Sampling != tt.sampling || c.ElicitForm != tt.form || c.ElicitURL != tt.url || c.Roots != tt.roots {
			t.Errorf("ParseCaps(%s) = %+v", tt.raw, c)
		}
		if got := c.Accepts(MethodElicitation, json.RawMessage(`{"mode":"url","url":"https://x"}`)); got != tt.acceptsURLElicit {
			t.Errorf("%s: accepts URL elicitation %v", tt.raw, got)
		}
		if got := c.acceptsAny(MethodElicitation); got != tt.acceptsAny {
			t.Errorf("%s: accepts some elicitation %v", tt.raw, got)
		}
	}
	// What cannot be read declares nothing, the second time too.
	for _, raw := range []string{`{"elicitation":true}`, `[]`, ``} {
		for range 2 {
			if c := ParseCaps(json.RawMessage(raw)); !reflect.DeepEqual(c, Caps{}) {
				t.Errorf("ParseCaps(%s) = %+v", raw, c)
			}
		}
	}
}

func TestString(t *testing.T) {
	for _, in := range []string{`"echo"`, `""`, `"a\"b"`, `"\u0061"`, `"é"`, "\"\xff\"", "\"a\tb\"", `"tools/call"`, `7`, `"`, `null`, `"a"b"`} {
		got, ok := String([]byte(in))
		var want string
		wantOK := in[0] == '"' && json.Unmarshal([]byte(in), &want) == nil
		if ok != wantOK || got != want {
			t.Errorf("String(%s) = %q, %v; encoding/json: %q, %v", in, got, ok, want, wantOK)
		}
	}
}

func TestIDKey(t *testing.T) {
	for in, want := range map[string]string{`"a"`: "s:a", ` "a\u0062" `: "s:ab", `7`: "n:7", `null`: "", ``: "", `"x`: ""} {
		if got := IDKey([]byte(in)); got != want {
			t.Errorf("IDKey(%s) = %q, want %q", in, got, want)
		}
	}
}

// AppendString must write JSON, whatever a peer put in the string: Go's
// quoting writes \x01, \a and \v, which no JSON parser reads.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"echo", "", "tools/call", `a"b`, `a\b`, "a\x01b", "bell\a", "tab\vv", "del\x7f", "é", "\u2028", "\xff", "<&>", "new\nline"} {
		out := AppendString([]byte("x"), s)
		if out[0] != 'x' {
			t.Fatalf("%q: the prefix is gone: %s", s, out)
		}
		var back string
		if err := json.Unmarshal(out[1:], &back); err != nil {
			t.Errorf("%q: wrote %s, not JSON: %v", s, out[1:], err)
			continue
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("%q: wrote %s, which reads back as %q", s, out[1:], back)
		}
	}
}

// Fields finds each key once, and refuses a key that peers could read
// differently: twice, or under another case (which encoding/json matches).
func TestFields(t *testing.T) {
	keys := []string{"name", "arguments", "_meta"}
	for _, tt := range []struct {
		obj  string
		want []string // values, "" for absent
		ok   bool
	}{
		{`{"name":"echo","arguments":{"a":1},"_meta":{}}`, []string{`"echo"`, `{"a":1}`, `{}`}, true},
		{` { "_meta" : null , "name" : "x" } `, []string{`"x"`, "", "null"}, true},
		{`{"other":1,"Other":2}`, []string{"", "", ""}, true},
		{`{"n\u0061me":"x"}`, []string{`"x"`, "", ""}, true},
		{`{}`, []string{"", "", ""}, true},
		{`[1]`, []string{"", "", ""}, true},
		{`{"name":"echo","name":"write_note"}`, nil, false},
		{`{"name":"echo","n\u0061me":"write_note"}`, nil, false},
		{`{"name":"echo","NAME":"write_note"}`, nil, false},
		{`{"Name":"write_note"}`, nil, false},
		{`{"argumentſ":{}}`, nil, false}, // the long s folds to s
		{`{"_META":{}}`, nil, false},
	} {
		vals := make([][]byte, len(keys))
		ok := Fields([]byte(tt.obj), keys, vals)
		if ok != tt.ok {
			t.Errorf("Fields(%s) ok = %v, want %v", tt.obj, ok, tt.ok)
			continue
		}
		for i, want := range tt.want {
			if string(vals[i]) != want {
				t.Errorf("Fields(%s) %s = %q, want %q", tt.obj, keys[i], vals[i], want)
			}
		}
	}
}

// Nesting is where validators differ most (a recursive one can exhaust
// the stack); encoding/json refuses past 10,000 levels and Valid must
// refuse exactly there too.
func TestValidNesting(t *testing.T) {
	for _, n := range []int{9_999, 10_000, 10_001, 1 << 20} {
		for _, c := range [][2]string{{"[", "]"}, {`{"a":`, "}"}} {
			closed := []byte(strings.Repeat(c[0], n) + "1" + strings.Repeat(c[1], n))
			open := closed[:n*len(c[0])]
			for _, b := range [][]byte{closed, open} {
				if got, want := Valid(b), json.Valid(b); got != want {
					t.Errorf("%d levels of %s (closed %v): Valid %v, encoding/json %v", n, c[0], len(b) == len(closed), got, want)
				}
			}
		}
	}
}

// skipString ends a string at its first quote not escaped, however long
// the run of backslashes before it.
func TestSkipString(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{`""`, 2},
		{`"abc",`, 5},
		{`"a\"b"`, 6},
		{`"a\\"b"`, 5},
		{`"a\\\"b"`, 8},
		{`"\\\\"`, 6},
		{`"\"`, -1},
		{`"\`, -1},
		{`"abc`, -1},
		{`"` + strings.Repeat(`\"`, 1000) + `"x`, 2002},
	} {
		if got := skipString([]byte(tt.in), 0); got != tt.want {
			t.Errorf("skipString(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// skipString reads a string in three ways (a short one byte by byte, a
// long one a quote at a time, then byte by byte again after an escaped
// quote): strings of every mix of escapes and plain runs, whose ends fall
// on either side of each switch, end where encoding/json says.
func TestSkipStringPhases(t *testing.T) {
	pieces := []string{`"`, `\`, `\"`, "\n", "\u00e9", "\\\\", "a", strings.Repeat("b", 15), strings.Repeat("c", 31), strings.Repeat("d", 40)}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		q, err := json.Marshal(sb.String())
		if err != nil {
			t.Fatal(err)
		}
		in := append(q, `,"next":"x"`...)
		if got := skipString(in, 0); got != len(q) {
			t.Fatalf("skipString(%s) = %d, want %d", in, got, len(q))
		}
	}
}

// BenchmarkMember looks for a member a large result does not have (a
// legacy upstream's resultType): a pass over the whole of it, for each
// shape a 64 KiB result takes. Plain text is read a quote at a time;
// JSON in a text (what most tools return) has an escaped quote every few
// bytes; structured content, a short string every few bytes.
func BenchmarkMember(b *testing.B) {
	type item struct {
		ID   int      `json:"id"`
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	var items []item
	for i := range 1100 {
		items = append(items, item{i, fmt.Sprintf("payload %d", i), []string{"a", "b"}})
	}
	inner, _ := json.Marshal(items)
	text := func(s string) []byte {
		b, _ := json.Marshal(map[string]any{"content": []any{map[string]string{"type": "text", "text": s}}})
		return b
	}
	structured, _ := json.Marshal(map[string]any{"structuredContent": map[string]any{"items": items}})
	for _, bb := range []struct {
		name string
		res  []byte
	}{
		{"text", text(strings.Repeat("benchmark payload ", 64<<10/18))},
		{"json-text", text(string(inner))},
		{"structured", structured},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.res)))
			for b.Loop() {
				if _, ok := Member(bb.res, "resultType"); ok {
					b.Fatal("found")
				}
			}
		})
	}
}

// A string dense with escapes is read 64 bytes at a time (scanEscaped):
// raw strings of every mix of escapes, runs of backslashes, quotes,
// control characters and bad escapes, after a dense start that switches
// to blocks, end (or are refused) where a byte-by-byte reading says,
// wherever they fall against the blocks' edges; and whole ones are valid
// exactly when encoding/json says.
func TestScanEscaped(t *testing.T) {
	pieces := []string{`\"`, `\\`, `\n`, `\/`, `\b`, `\f`, `\r`, `\t`, `\u00e9`, `\uD83D`, `\u12`, `\x`, "\x01", "\x1f", `"`, `\`,
		`\\\`, `\\\\\`, strings.Repeat(`\`, 63), strings.Repeat(`\`, 64), "\xff", "é", "a", "ab",
		strings.Repeat("b", 7), strings.Repeat("c", 33), strings.Repeat("d", 64), strings.Repeat("e", 100)}
	dense := strings.Repeat(`{\"id\":1}`, 8)
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 20000 {
		var sb strings.Builder
		sb.WriteString(`"`)
		sb.WriteString(dense[:rng.IntN(len(dense))])
		for range rng.IntN(40) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if n%2 == 0 {
			sb.WriteString(`"`)
		}
		sb.WriteString(strings.Repeat("z", rng.IntN(130)))
		in := []byte(sb.String())
		// Cut anywhere too: a string's end, or an escape's, on a
		// block's edge or the input's.
		cut := rng.IntN(len(in) + 1)
		for _, in := range [][]byte{in, in[:cut:cut]} {
			want := slowString(in)
			if got := scanString(in, 0); got != want {
				t.Fatalf("scanString(%q) = %d, want %d", in, got, want)
			}
			// The block reading itself, from the first backslash
			// however sparse the escapes before it, and not from 0.
			if at := nextSpecial(in, 1); at < len(in) && in[at] == '\\' {
				if got := scanEscaped(in, at); got != want {
					t.Fatalf("scanEscaped(%q, %d) = %d, want %d", in, at, got, want)
				}
			}
			if end := want; end > 0 {
				if got, want := Valid(in[:end]), json.Valid(in[:end]); got != want {
					t.Fatalf("Valid(%q) = %v, encoding/json says %v", in[:end], got, want)
				}
			}
		}
	}
}

// An escape cut by the input's end is refused where a block ends there,
// whatever escape it is and however much of it is left.
func TestScanEscapedCutAtTheEnd(t *testing.T) {
	dense := `"` + strings.Repeat(`\"a`, 40)
	for _, esc := range []string{`\u00e9`, `\n`, `\\`, `\"`} {
		for pad := range 70 {
			in := dense + strings.Repeat("b", pad) + esc + `"`
			for n := len(dense); n <= len(in); n++ {
				cut := []byte(in[:n])
				cut = cut[:n:n] // no bytes past the end to read
				want := slowString(cut)
				if got := scanEscaped(cut, 1); got != want {
					t.Fatalf("scanEscaped(%q) = %d, want %d", cut, got, want)
				}
			}
		}
	}
}

// slowString is scanString read one byte at a time.
func slowString(b []byte) int {
	for j := 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(b) {
				return -1
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if len(b)-j < 6 || !hex4(b[j+2:j+6]) {
					return -1
				}
				j += 5
			default:
				return -1
			}
		}
	}
	return -1
}
