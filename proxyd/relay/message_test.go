package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
)

func TestParseMessage(t *testing.T) {
	type want struct {
		jsonrpc, id, method, params, result string
		err                                 *RPCError
	}
	tests := []struct {
		name, in string
		want     want
		err      error
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"}"}}}`,
			want{jsonrpc: "2.0", id: `1`, method: "tools/call", params: `{"name":"echo","arguments":{"text":"}"}}`}, nil},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
			want{jsonrpc: "2.0", method: "notifications/progress", params: `{"progressToken":"p","progress":1}`}, nil},
		{"response with result", `{"jsonrpc":"2.0","id":"mcpx-1","result":{"content":[]}}`,
			want{jsonrpc: "2.0", id: `"mcpx-1"`, result: `{"content":[]}`}, nil},
		{"error response with data", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad","data":{"field":"x"}}}`,
			want{jsonrpc: "2.0", id: `7`, err: &RPCError{Code: -32602, Message: "bad", Data: []byte(`{"field":"x"}`)}}, nil},
		{"error null", `{"jsonrpc":"2.0","id":7,"error":null,"result":1}`,
			want{jsonrpc: "2.0", id: `7`, result: `1`}, nil},
		{"id string", `{"id":"a\"b","method":"ping"}`, want{id: `"a\"b"`, method: "ping"}, nil},
		{"id number", `{"id":-1.5e3,"method":"ping"}`, want{id: `-1.5e3`, method: "ping"}, nil},
		{"id null", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
			want{jsonrpc: "2.0", id: `null`, err: &RPCError{Code: -32700, Message: "parse"}}, nil},
		{"spaces around values", " \n{ \"id\" : 2 , \"method\" :\t\"ping\" , \"params\" : { } } ",
			want{id: `2`, method: "ping", params: `{ }`}, nil},
		{"method null is no method", `{"jsonrpc":"2.0","id":1,"method":null,"result":{}}`,
			want{jsonrpc: "2.0", id: `1`, result: `{}`}, nil},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":5}`, want{}, ErrNotMessage},
		{"method object", `{"jsonrpc":"2.0","id":1,"method":{"a":1}}`, want{}, ErrNotMessage},
		{"method escaped", `{"jsonrpc":"2.0","method":"tools\/call","id":1}`,
			want{jsonrpc: "2.0", id: `1`, method: "tools/call"}, nil},
		{"method unicode escape", `{"method":"caf\u00e9"}`, want{method: "café"}, nil},
		{"method invalid UTF-8 as encoding/json", "{\"method\":\"\xff\"}", want{method: "\uFFFD"}, nil},
		{"method with non-ASCII", `{"method":"ツール/call"}`, want{method: "ツール/call"}, nil},
		{"jsonrpc missing", `{"id":1,"method":"ping"}`, want{id: `1`, method: "ping"}, nil},
		{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"ping"}`, want{id: `1`, method: "ping"}, nil},
		{"jsonrpc wrong", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, want{jsonrpc: "1.0", id: `1`, method: "ping"}, nil},
		{"jsonrpc escaped", `{"jsonrpc":"2\u002e0"}`, want{jsonrpc: "2.0"}, nil},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, want{}, ErrNotMessage},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"failed"}`, want{}, ErrNotMessage},
		{"error code not a number", `{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}`, want{}, ErrNotMessage},
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"method":"ping"`, want{}, ErrInvalidJSON},
		{"empty", ``, want{}, ErrInvalidJSON},
		{"trailing garbage", `{"id":1} {"id":2}`, want{}, ErrInvalidJSON},
		{"batch", ` [{"jsonrpc":"2.0","id":1,"method":"ping"}]`, want{}, ErrBatch},
		{"empty batch", `[]`, want{}, ErrBatch},
		{"not an object", `"ping"`, want{}, ErrNotMessage},
		{"duplicate keys: last wins", `{"method":"a","id":1,"method":"b","id":"x","params":[1],"params":{"n":2}}`,
			want{id: `"x"`, method: "b", params: `{"n":2}`}, nil},
		{"duplicate method, last null", `{"method":"a","method":null}`, want{}, nil},
		{"duplicate error, last null", `{"id":1,"error":{"code":1,"message":"m"},"error":null}`, want{id: `1`}, nil},
		{"a bad duplicate spoils the message", `{"method":5,"method":"ping"}`, want{}, ErrNotMessage},
		{"keys match exactly", `{"Method":"ping","ID":1,"Params":{}}`, want{}, nil},
		{"escaped key", `{"m\u0065thod":"ping"}`, want{method: "ping"}, nil},
		{"nested members are not the message's", `{"params":{"method":"x","id":9}}`, want{params: `{"method":"x","id":9}`}, nil},
	}
	for _, tt := range tests {
		m, err := ParseMessage([]byte(tt.in))
		if !errors.Is(err, tt.err) || (err != nil) != (tt.err != nil) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			continue
		}
		if err != nil {
			if m.Method != "" || m.ID != nil || m.Params != nil || m.Result != nil || m.Error != nil {
				t.Errorf("%s: error %v with a message %+v", tt.name, err, m)
			}
			continue
		}
		got := want{m.JSONRPC, string(m.ID), m.Method, string(m.Params), string(m.Result), m.Error}
		if got.jsonrpc != tt.want.jsonrpc || got.id != tt.want.id || got.method != tt.want.method ||
			got.params != tt.want.params || got.result != tt.want.result {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
		if (got.err == nil) != (tt.want.err == nil) || got.err != nil &&
			(got.err.Code != tt.want.err.Code || got.err.Message != tt.want.err.Message || string(got.err.Data) != string(tt.want.err.Data)) {
			t.Errorf("%s: error member %+v, want %+v", tt.name, got.err, tt.want.err)
		}
	}
}

// Errors name the member and its type, never its value (the sender's
// bytes stay out of logs).
func TestParseMessageErrorText(t *testing.T) {
	for in, want := range map[string]string{
		`{"method":5}`:                  "JSON that is not a JSON-RPC message: method is a number, not a string",
		`{"jsonrpc":{"secret":"s3"}}`:   "JSON that is not a JSON-RPC message: jsonrpc is an object, not a string",
		`{"error":"s3"}`:                "JSON that is not a JSON-RPC message: error is not an object with a code and a message",
		`true`:                          "JSON that is not a JSON-RPC message: not an object",
		`[{"method":"s3"}]`:             "a JSON-RPC batch",
		`{"method":"s3"`:                "invalid JSON",
		`{"method":true,"method":"s3"}`: "JSON that is not a JSON-RPC message: method is a boolean, not a string",
	} {
		_, err := ParseMessage([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("ParseMessage(%s): %v, want %q", in, err, want)
		}
	}
}

// Params and result, however large, are the sender's bytes in place.
func TestParseMessageKeepsHugeValuesInPlace(t *testing.T) {
	huge := `{"text":"` + strings.Repeat("x", 8<<20) + `","list":[` + strings.Repeat(`{"a":"]}"},`, 1<<16) + `1]}`
	for _, member := range []string{"params", "result"} {
		b := []byte(`{"jsonrpc":"2.0","id":1,"` + member + `":` + huge + `}`)
		m, err := ParseMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Params
		if member == "result" {
			v = m.Result
		}
		at := bytes.Index(b, []byte(huge))
		if len(v) != len(huge) || unsafe.SliceData(v) != &b[at] {
			t.Fatalf("%s is not a sub-slice of the message (%d bytes)", member, len(v))
		}
	}
}

func BenchmarkParseMessage(b *testing.B) {
	for _, bb := range []struct{ name, body string }{
		{"tools-call", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"hello world","n":3},"_meta":{"progressToken":"p-1"}}}`},
		{"result", `{"jsonrpc":"2.0","id":"mcpx-17","result":{"content":[{"type":"text","text":"hello world"}],"isError":false}}`},
		{"progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-1","progress":1,"total":3}}`},
		{"escaped-method", `{"jsonrpc":"2.0","id":42,"method":"tools\/call","params":{"name":"alpha__echo"}}`},
		{"error", `{"jsonrpc":"2.0","id":"mcpx-17","error":{"code":-32602,"message":"Invalid params","data":{"field":"text"}}}`},
		{"huge-params", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"a","arguments":{"blob":"` + strings.Repeat("x", 1<<20) + `"}}}`},
		{"batch", `[` + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 100) + `{"jsonrpc":"2.0","id":1,"method":"ping"}]`},
		// 64 KiB results: plain text, JSON records in a text (an escaped
		// quote every few bytes) and the records as structured content.
		{"text-64k", result(`{"content":[{"type":"text","text":` + quote(strings.Repeat("benchmark payload ", 64<<10/18)) + `}]}`)},
		{"records-64k", result(`{"content":[{"type":"text","text":` + quote(mcpserver.RecordsText(64<<10)) + `}]}`)},
		// Lines of a log, an escaped line break every 60 bytes or so.
		{"lines-64k", result(`{"content":[{"type":"text","text":` + quote(strings.Repeat("2026-12-06T19:40:01Z INFO upstream ready server=alpha tools=3\n", 64<<10/62)) + `}]}`)},
		{"structured-64k", result(`{"structuredContent":{"records":` + mcpserver.RecordsText(56<<10) + `}}`)},
	} {
		body := []byte(bb.body)
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				_, _ = ParseMessage(body)
			}
		})
	}
}

func result(res string) string { return `{"jsonrpc":"2.0","id":"mcpx-17","result":` + res + `}` }

func quote(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// The parse lists the members of a request's params and of a response's
// result (the last, when one appears twice), which its readers then find
// without a pass over them; a list answers for those bytes alone.
func TestParseListsMembers(t *testing.T) {
	tests := []struct {
		msg, key, want string
		listed         bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"}"}}}`, "arguments", `{"text":"}"}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}`, "resultType", `"complete"`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"isError":false},"result":{"isError":true}}`, "isError", `true`, true},
		{`{"jsonrpc":"2.0","id":1,"result":[1]}`, "isError", ``, false},
		{`{"jsonrpc":"2.0","id":1,"result":{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}}`, "9", `9`, false},
	}
	for _, tt := range tests {
		m, err := ParseMessage([]byte(tt.msg))
		if err != nil {
			t.Fatal(err)
		}
		obj := m.Params
		if obj == nil {
			obj = m.Result
		}
		k, _, listed := m.Members.find(obj, tt.key)
		if listed != tt.listed {
			t.Errorf("%s: listed %v, want %v", tt.msg, listed, tt.listed)
		}
		if listed && (k < 0 || string(m.Members.value(k)) != tt.want) {
			t.Errorf("%s: %s is %d in the list", tt.msg, tt.key, k)
		}
		if v, _ := m.Members.Member(obj, tt.key); string(v) != tt.want {
			t.Errorf("%s: %s reads %s, want %s", tt.msg, tt.key, v, tt.want)
		}
	}
}
