package relay

import (
	"bytes"
	"encoding/json"
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
		if json.Unmarshal(obj, &m) != nil || !utf8.ValidString(key) {
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
		if ok && dups == 1 && !bytes.Equal(compact(t, v), compact(t, want)) {
			t.Fatalf("Member(%q, %q) = %s, encoding/json says %s", obj, key, v, want)
		}
		for name, out := range map[string][]byte{"WithMember": with, "WithoutMember": without} {
			if !json.Valid(out) {
				t.Fatalf("%s(%q, %q) = %q, not valid JSON", name, obj, key, out)
			}
		}
		if got, ok := Member(with, key); !ok || (dups <= 1 && string(got) != `{"set":1}`) {
			t.Fatalf("WithMember(%q, %q) = %q: the member reads %q", obj, key, with, got)
		}
		if _, ok := Member(without, key); ok && dups <= 1 {
			t.Fatalf("WithoutMember(%q, %q) = %q still has it", obj, key, without)
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
