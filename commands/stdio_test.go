package commands

import (
	"encoding/json"
	"testing"
)

// The bridge's own error answers are JSON whatever their message holds:
// a proxyd answer or a client's line may carry control characters or
// bytes that are not UTF-8.
func TestErrorLineIsJSON(t *testing.T) {
	for _, tt := range []struct {
		id, msg string
		want    string // the message read back, when not msg
	}{
		{"", "parse error: invalid character 'x' looking for beginning of value", ""},
		{"7", "proxyd answered HTTP 502: bad\x01gateway", ""},
		{`"a"`, "bell\a and tab\v", ""},
		{"", "not utf-8: \xff\xfe", "not utf-8: \uFFFD\uFFFD"},
		{"", `quote " and backslash \`, ""},
	} {
		line := errorLine(json.RawMessage(tt.id), -32603, tt.msg)
		var m struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Errorf("%q: %s is not JSON: %v", tt.msg, line, err)
			continue
		}
		wantID := tt.id
		if wantID == "" {
			wantID = "null"
		}
		want := tt.want
		if want == "" {
			want = tt.msg
		}
		if m.JSONRPC != "2.0" || string(m.ID) != wantID || m.Error.Code != -32603 || m.Error.Message != want {
			t.Errorf("%q: %s", tt.msg, line)
		}
	}
}
