package commands

import (
	"bytes"
	"encoding/json"
	"regexp"
	"time"
)

// SchemaVersion is the version of mcpx's JSON and YAML output: every
// object printed (each element of a list, each line of a stream) carries
// it as "schema_version". Fields are only ever added; a rename or removal
// raises it.
const SchemaVersion = 1

var schemaField = []byte(`"schema_version":1`)

// withSchemaVersion adds schema_version to a JSON object, or to each
// object of a JSON array, keeping the order of the other fields.
func withSchemaVersion(b []byte) []byte {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 1 && b[0] == '{':
		return addField(b)
	case len(b) > 1 && b[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(b, &items) != nil {
			return b
		}
		var out bytes.Buffer
		out.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				out.WriteByte(',')
			}
			it = bytes.TrimSpace(it)
			if len(it) > 1 && it[0] == '{' {
				it = addField(it)
			}
			out.Write(it)
		}
		out.WriteByte(']')
		return out.Bytes()
	}
	return b
}

func addField(obj []byte) []byte {
	rest := bytes.TrimSpace(obj[1:])
	out := append([]byte{'{'}, schemaField...)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// rfc3339 matches a JSON string that is exactly an RFC 3339 time with a
// numeric zone offset.
var rfc3339 = regexp.MustCompile(`"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{2}:\d{2})"`)

// utcTimes rewrites the times of JSON output in UTC: tables show local
// time with its offset, JSON and YAML RFC 3339 in UTC.
func utcTimes(b []byte) []byte {
	return rfc3339.ReplaceAllFunc(b, func(m []byte) []byte {
		t, err := time.Parse(time.RFC3339Nano, string(m[1:len(m)-1]))
		if err != nil {
			return m
		}
		return []byte(`"` + t.UTC().Format(time.RFC3339Nano) + `"`)
	})
}

// machineJSON is v as mcpx prints JSON: schema_version added, times in UTC.
func machineJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return utcTimes(withSchemaVersion(b)), nil
}
