package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// The relay reads and edits members of client and upstream JSON without
// decoding it; on any input it must not panic, and on a valid object it
// must agree with encoding/json and keep the object valid.
func FuzzMembers(f *testing.F) {
	for _, s := range []struct{ obj, key string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, "params"},
		{`{"a":"\"}","b":[1,{"c":"}"}],"d":null}`, "b"},
		{` { "k\u0065y" : true } `, "key"},
		{`{}`, "x"},
		{`{"a":1,"a":2}`, "a"},
		{` { "a" : 1 , "b" : 2 , "a" : 3 , "c" : 4 } `, "a"},
		{`{"a":1,"b":2,"a":3}`, "b"},
		{`[1,2]`, "a"},
		{`{"a":`, "a"},
		{`{"a":"\`, "a"},
	} {
		f.Add([]byte(s.obj), s.key)
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		v, ok := Member(obj, key)
		StringMember(obj, key)
		EachMember(obj, func([]byte, []byte) {})
		with := WithMember(obj, key, []byte(`{"set":1}`))
		without := WithoutMember(obj, key)

		var m map[string]json.RawMessage
		// null decodes into a map too (a nil one), but is no object.
		if json.Unmarshal(obj, &m) != nil || m == nil || !utf8.ValidString(key) {
			return // only valid objects and keys have an answer to check
		}
		dups := 0
		EachValue(obj, func(k, _ []byte) {
			if string(k) == key {
				dups++
			}
		})
		want, has := m[key]
		if ok != has {
			t.Fatalf("Member(%q, %q) found=%v, encoding/json says %v", obj, key, ok, has)
		}
		// A key twice reads as its last occurrence, as encoding/json reads it.
		if ok && !bytes.Equal(compact(t, v), compact(t, want)) {
			t.Fatalf("Member(%q, %q) = %s, encoding/json says %s", obj, key, v, want)
		}
		for name, out := range map[string][]byte{"WithMember": with, "WithoutMember": without} {
			if !json.Valid(out) {
				t.Fatalf("%s(%q, %q) = %q, not valid JSON", name, obj, key, out)
			}
			// Every other member reads as before; key once or not at all.
			var got map[string]json.RawMessage
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%s(%q, %q) = %q: %v", name, obj, key, out, err)
			}
			for k, w := range m {
				if g, has := got[k]; k != key && (!has || !bytes.Equal(compact(t, g), compact(t, w))) {
					t.Fatalf("%s(%q, %q) = %q: %q reads %s, was %s", name, obj, key, out, k, g, w)
				}
			}
			n := 0
			EachValue(out, func(k, _ []byte) {
				if string(k) == key {
					n++
				}
			})
			if want := map[string]int{"WithMember": 1, "WithoutMember": 0}[name]; n != want {
				t.Fatalf("%s(%q, %q) = %q has the key %d times", name, obj, key, out, n)
			}
		}
		if got, ok := Member(with, key); !ok || string(got) != `{"set":1}` {
			t.Fatalf("WithMember(%q, %q) = %q: the member reads %q", obj, key, with, got)
		}
	})
}

// FuzzRewrite holds Rewrite to the two edits it does in one copy.
func FuzzRewrite(f *testing.F) {
	for _, s := range []struct{ obj, key, drop string }{
		{`{"name":"a__x","arguments":{"t":"}"},"_meta":{"progressToken":1}}`, "name", "_meta"},
		{`{"_meta":{} , "name":"x"}`, "name", "_meta"},
		{`{"a":1,"a":2,"b":3,"b":4}`, "a", "b"},
		{`{"a":1}`, "a", "a"},
		{`{"a":`, "a", "b"},
		{`{"name":"a__x","":1}`, "name", ""},
	} {
		f.Add([]byte(s.obj), s.key, s.drop)
	}
	f.Fuzz(func(t *testing.T, obj []byte, key, drop string) {
		got := Rewrite(obj, key, []byte(`{"set":1}`), drop)
		if !json.Valid(obj) {
			return // no panic is all that is asked of other input
		}
		want := WithMember(obj, key, []byte(`{"set":1}`))
		if drop != "" { // "": nothing to drop
			want = WithoutMember(want, drop)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Rewrite(%q, %q, %q) = %q, the two edits give %q", obj, key, drop, got, want)
		}
	})
}

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compacting %q: %v", b, err)
	}
	return out.Bytes()
}

// ParseMessage on any bytes: no panic; on a message it accepts, params,
// result and id are valid JSON; and it reads what encoding/json reads,
// member by member in order (the last occurrence wins, keys match
// exactly, a jsonrpc, method or error of the wrong type refuses it).
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":"mcpx-s-1","result":{"action":"accept"}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no","data":[1]}}`,
		`{"jsonrpc":"2.0","id":null,"error":null,"method":null}`,
		`{"method":"tools\/call","jsonrpc":"\u0032.0"}`,
		`{"method":1}`,
		`{"method":"a","method":null,"Method":"b"}`,
		`{"error":{"code":1.5}}`,
		`[]`,
		`"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err == nil {
			for name, v := range map[string][]byte{"id": m.ID, "params": m.Params, "result": m.Result} {
				if v != nil && !json.Valid(v) {
					t.Fatalf("%s %q from %q is not JSON", name, v, b)
				}
			}
		}
		members, object := decodeMembers(b)
		if !object {
			if err == nil {
				t.Fatalf("%q is no JSON object, but ParseMessage read %+v", b, m)
			}
			return
		}
		var want Message
		bad := ""
		for _, mb := range members {
			switch mb.key {
			case "jsonrpc", "method":
				var s *string
				if json.Unmarshal(mb.value, &s) != nil {
					bad = mb.key
				}
				str := ""
				if s != nil {
					str = *s
				}
				if mb.key == "method" {
					want.Method = str
				} else {
					want.JSONRPC = str
				}
			case "error":
				var e *struct {
					Code    int             `json:"code"`
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				}
				if (mb.value[0] != '{' && string(mb.value) != "null") || json.Unmarshal(mb.value, &e) != nil {
					bad = mb.key
				}
				want.Error = nil
				if e != nil {
					want.Error = &RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
				}
			case "id":
				want.ID = mb.value
			case "params":
				want.Params = mb.value
			case "result":
				want.Result = mb.value
			}
		}
		if (bad != "") != (err != nil) {
			t.Fatalf("ParseMessage(%q): error %v; encoding/json finds a bad member: %q", b, err, bad)
		}
		if err != nil {
			return
		}
		if m.JSONRPC != want.JSONRPC || m.Method != want.Method {
			t.Fatalf("ParseMessage(%q): jsonrpc %q method %q, encoding/json reads %q %q", b, m.JSONRPC, m.Method, want.JSONRPC, want.Method)
		}
		for name, pair := range map[string][2][]byte{"id": {m.ID, want.ID}, "params": {m.Params, want.Params}, "result": {m.Result, want.Result}} {
			if (pair[0] == nil) != (pair[1] == nil) || pair[0] != nil && !bytes.Equal(compact(t, pair[0]), compact(t, pair[1])) {
				t.Fatalf("ParseMessage(%q): %s %q, encoding/json reads %q", b, name, pair[0], pair[1])
			}
		}
		if (m.Error == nil) != (want.Error == nil) || m.Error != nil && (m.Error.Code != want.Error.Code ||
			m.Error.Message != want.Error.Message || !bytes.Equal(m.Error.Data, want.Error.Data)) {
			t.Fatalf("ParseMessage(%q): error %+v, encoding/json reads %+v", b, m.Error, want.Error)
		}
	})
}

type jsonMember struct {
	key   string
	value json.RawMessage
}

// decodeMembers is the members of the JSON object b in order, duplicates
// included, as encoding/json tokenizes them; false when b is no object.
func decodeMembers(b []byte) ([]jsonMember, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []jsonMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, jsonMember{tok.(string), v})
	}
	return out, true
}

// Where Fields answers, it reads what encoding/json reads into a struct
// (case-insensitive keys, the last one kept), and what a first-wins or
// exact-key decoder would read.
func FuzzFields(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"a":1},"_meta":{}}`,
		`{"name":"a","NAME":"b"}`,
		`{"name":"a","name":"b"}`,
		`{"argumentſ":1}`,
		`{"N\u0041ME":1}`,
		`{"x":{"name":1},"name":2}`,
	} {
		f.Add([]byte(s))
	}
	keys := []string{"name", "arguments", "_meta"}
	f.Fuzz(func(t *testing.T, obj []byte) {
		vals := make([][]byte, len(keys))
		ok := Fields(obj, keys, vals)
		var exact map[string]json.RawMessage
		if !ok || json.Unmarshal(obj, &exact) != nil {
			return
		}
		var folded struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(obj, &folded); err != nil {
			t.Fatalf("encoding/json reads %q as a map but not as a struct: %v", obj, err)
		}
		for i, want := range []json.RawMessage{folded.Name, folded.Arguments, folded.Meta} {
			if (vals[i] == nil) != (want == nil) || vals[i] != nil && !bytes.Equal(compact(t, vals[i]), compact(t, want)) {
				t.Fatalf("Fields(%q) %s = %q, encoding/json reads %q", obj, keys[i], vals[i], want)
			}
			if e, has := exact[keys[i]]; has != (vals[i] != nil) || has && !bytes.Equal(compact(t, e), compact(t, vals[i])) {
				t.Fatalf("Fields(%q) %s = %q, an exact-key read gives %q", obj, keys[i], vals[i], e)
			}
		}
	})
}

// Valid must decide as encoding/json.Valid does on every input: a message
// proxyd takes and the MCP library then refuses (or the reverse) would be
// relayed or refused unlike the direct call.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `"a"`, `1`, `-0.5e+3`, `01`, `1.`, `-`, `1e400`, `{"a":1,}`, `[1,]`,
		"\"\x00\"", "\"\xff\"", "\"\x1f\"", `"\ud800"`, `"\u00zz"`, `"\"`, `"\\"`, `"\\\""`,
		` {"a" : [ true , false , null ] } `, "\ufeff{}", `{"a":"b"}x`, `nul`, `tru`,
		"\x00", "{}\x00", " \t\r\n{}\n", `[[[[[[]]]]]]`, `{"a":{"b":{"c":[1,2,{"d":"e"}]}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x\"y\\"}}}`,
		// Dense with escapes and long enough to be read in blocks.
		`["` + strings.Repeat(`{\"id\":1,\"tags\":[\"a\"]}\\`, 12) + "\x01\"]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// A Members answers as a scan of its object does: for any object the
// check accepts, each of its readers agrees with the scanning reader, and
// an edit made with it is the edit made without.
func FuzzListedMembers(f *testing.F) {
	for _, s := range []struct{ obj, key string }{
		{`{"name":"a__x","arguments":{"t":"}"},"_meta":{"progressToken":1}}`, "_meta"},
		{` { "resultType" : "complete" , "content":[] } `, "resultType"},
		{`{"a":1,"a":2,"A":3}`, "a"},
		{`{"k\u0065y":true,"x":1}`, "key"},
		{`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}`, "9"},
		{`{}`, "x"},
		{`{"":0}`, ""},
	} {
		f.Add([]byte(s.obj), s.key)
	}
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var ms Members
		i := skipSpace(obj, 0)
		if i >= len(obj) || obj[i] != '{' {
			return
		}
		end := scanObject(obj, i, 0, &ms)
		if valid := end >= 0 && skipSpace(obj, end) == len(obj); valid != json.Valid(obj) {
			t.Fatalf("scanObject(%q) valid %v, encoding/json says %v", obj, valid, !valid)
		}
		if end < 0 {
			return
		}
		obj = obj[i:end] // the object as a parse lists it
		keys := []string{key, "name", "_meta"}
		got, want := make([][]byte, 3), make([][]byte, 3)
		if g, w := ms.Fields(obj, keys, got), Fields(obj, keys, want); g != w || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Fields(%q, %q): listed %v %q, scanned %v %q", obj, keys, g, got, w, want)
		}
		if g, gok := ms.Member(obj, key); true {
			w, wok := Member(obj, key)
			if gok != wok || !bytes.Equal(g, w) {
				t.Fatalf("Member(%q, %q): listed %q %v, scanned %q %v", obj, key, g, gok, w, wok)
			}
		}
		for _, e := range []*Edit{{Drop: key}, {Key: key, Value: []byte(`"x"`), Drop: "_meta"}, {Key: "name", Value: []byte(`1`), Drop: key}} {
			if g, w := bytes.Join(e.PartsWith(obj, &ms), nil), bytes.Join(e.Parts(obj), nil); !bytes.Equal(g, w) {
				t.Fatalf("edit %+v of %q: listed %q, scanned %q", e, obj, g, w)
			}
		}
		if k, _, listed := ms.find(bytes.Clone(obj), key); listed || k >= 0 {
			t.Fatalf("a copy of %q is listed", obj)
		}
	})
}
