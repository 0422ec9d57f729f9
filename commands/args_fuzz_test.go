package commands

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// KEY=VALUE and JSON call arguments (typed without a schema), on any
// input: an error or a JSON object holding every key given.
func FuzzCallArguments(f *testing.F) {
	for _, s := range [][2]string{
		{"text=hello", "n=3"}, {`{"a":1}`, ""}, {"flag=true", "obj={\"x\":[1]}"},
		{"=x", ""}, {"k=", "k=v"}, {"a=b=c", "q=\"quoted\""}, {`{"a":`, ""}, {"noequals", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pos, flag string) {
		if strings.HasPrefix(pos, "@") {
			return // a file name: not what this target reads
		}
		var flags []string
		if flag != "" {
			flags = []string{flag}
		}
		raw, err := parseArguments([]string{pos}, flags, func() map[string][]string { return nil }, strings.NewReader(""))
		if err != nil || raw == nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("callArguments(%q, %q) = %q, not a JSON object: %v", pos, flags, raw, err)
		}
		if strings.HasPrefix(strings.TrimSpace(pos), "{") || pos == "-" {
			return
		}
		for _, kv := range append([]string{pos}, flags...) {
			if k, _, _ := strings.Cut(kv, "="); m[k] == nil {
				t.Fatalf("callArguments(%q, %q) = %s lost key %q", pos, flags, raw, k)
			}
		}
	})
}

// --since/--until values, on any input: an error or a time no later than
// now for durations and days.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"30m", "1h", "7d", "0d", "2026-01-02", "2026-01-02T15:04:05", "2026-01-02T15:04:05Z",
		"-5m", "106752d", "9999999999d", "1e3h", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseWhen(s, now)
		if err != nil {
			return
		}
		if _, derr := time.ParseDuration(strings.TrimSpace(s)); (derr == nil || strings.HasSuffix(strings.TrimSpace(s), "d")) && got.After(now) {
			t.Fatalf("parseWhen(%q) = %s, after now (%s): a duration counts back", s, got, now)
		}
	})
}
