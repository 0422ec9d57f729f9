package callerr

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// The transport's peeks at upstream bodies (a JSON-RPC error's code in a
// JSON body or in an event stream) on any bytes: no panic, the body
// passes through unchanged, and a code is reported only when the body
// says so.
func FuzzRecorderPeeks(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"x"}}`,
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602}}\n\n",
		"data: {\"error\":\ndata: {\"code\":1}}\n\n",
		`<!DOCTYPE html><title>502</title>`,
		`{"error":{"code":"nope"}}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		rec := &Recorder{}
		resp := &http.Response{StatusCode: 200, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)), Header: http.Header{}}
		if stream {
			resp.Body = &sseObserver{rc: resp.Body, rec: rec}
		} else {
			inspectBody(resp, rec, "application/json")
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("the body changed on its way through (err %v)", err)
		}
		f := rec.Facts()
		if !stream && f.HasJSONRPCCode {
			var msg struct {
				Error struct{ Code int } `json:"error"`
			}
			if json.Unmarshal(body, &msg) != nil || msg.Error.Code != f.JSONRPCCode {
				t.Fatalf("code %d reported from %q", f.JSONRPCCode, body)
			}
		}
	})
}
