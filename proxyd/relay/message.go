package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Message is one JSON-RPC 2.0 message as a client or an upstream sent it:
// a request, a notification or a response. ID, Params and Result are the
// sender's bytes (sub-slices of what was parsed: nothing is copied or
// decoded), so a relayed message keeps them byte for byte.
type Message struct {
	// JSONRPC is the version the message names, "" when absent or null.
	JSONRPC string
	// ID is nil when absent and `null` when null (an error response may
	// carry a null id; a request may not).
	ID json.RawMessage
	// Method is "" when absent or null: such a message is a response.
	Method string
	Params json.RawMessage
	Result json.RawMessage
	// Error is a response's error, nil when absent or null.
	Error *RPCError
	// Members lists the members of Params or Result (an object), found
	// by the pass that parsed the message, for readers of several of them.
	Members Members
}

// Why ParseMessage refuses bytes, worded to follow "sent" ("the upstream
// sent a JSON-RPC batch").
var (
	ErrInvalidJSON = errors.New("invalid JSON")
	ErrBatch       = errors.New("a JSON-RPC batch")
	// ErrNotMessage is valid JSON that is no JSON-RPC message: not an
	// object, or a member of the wrong type (the error names it).
	ErrNotMessage = errors.New("JSON that is not a JSON-RPC message")
)

// ParseMessage reads one JSON-RPC message. A member is what its last
// occurrence says (as encoding/json decides duplicates); keys match
// exactly, as JSON-RPC spells them. A jsonrpc or method that is neither a
// string nor null makes the message invalid, as it does for the MCP
// library, which decodes both into strings. Whether the message is
// acceptable (its jsonrpc version, an id's type) is the caller's policy.
// The caller must not change b while it uses the message.
func ParseMessage(b []byte) (Message, error) {
	// One pass checks the message and reads its members (see Valid).
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		switch {
		case !Valid(b):
			return Message{}, ErrInvalidJSON
		case b[i] == '[':
			return Message{}, ErrBatch
		}
		return Message{}, fmt.Errorf("%w: not an object", ErrNotMessage)
	}
	var m Message
	// A member of the wrong type is told once the message is known to be
	// valid JSON: invalid JSON is the first thing wrong with it.
	var wrong error
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return Message{}, ErrInvalidJSON
			}
			kEnd := scanString(b, i)
			if kEnd < 0 {
				return Message{}, ErrInvalidJSON
			}
			key, ok := keyBytes(b[i:kEnd])
			if i = skipSpace(b, kEnd); !ok || i >= len(b) || b[i] != ':' {
				return Message{}, ErrInvalidJSON
			}
			vStart := skipSpace(b, i+1)
			var vEnd int
			if vStart < len(b) && b[vStart] == '{' && (string(key) == "params" || string(key) == "result") {
				vEnd = scanObject(b, vStart, 1, &m.Members)
			} else {
				vEnd = scanValue(b, vStart, 1)
			}
			if vEnd < 0 {
				return Message{}, ErrInvalidJSON
			}
			if wrong == nil {
				wrong = m.set(key, b[vStart:vEnd])
			}
			if i = skipSpace(b, vEnd); i >= len(b) {
				return Message{}, ErrInvalidJSON
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return Message{}, ErrInvalidJSON
			}
			i = skipSpace(b, i+1)
		}
	}
	if skipSpace(b, i) != len(b) {
		return Message{}, ErrInvalidJSON
	}
	if wrong != nil {
		return Message{}, wrong
	}
	return m, nil
}

// set reads member key of the message, its value v valid JSON; an error
// when its type is wrong.
func (m *Message) set(key, v []byte) error {
	var ok bool
	switch string(key) {
	case "jsonrpc":
		if m.JSONRPC, ok = stringOrNull(v); !ok {
			return fmt.Errorf("%w: jsonrpc is %s, not a string", ErrNotMessage, kind(v))
		}
	case "method":
		if m.Method, ok = stringOrNull(v); !ok {
			return fmt.Errorf("%w: method is %s, not a string", ErrNotMessage, kind(v))
		}
	case "id":
		m.ID = v
	case "params":
		m.Params = v
	case "result":
		m.Result = v
	case "error":
		if m.Error, ok = errorOrNull(v); !ok {
			return fmt.Errorf("%w: error is not an object with a code and a message", ErrNotMessage)
		}
	}
	return nil
}

// stringOrNull decodes v, valid JSON, as a string ("" for null). A string
// without escapes is not decoded, and a common one is not even copied.
func stringOrNull(v []byte) (string, bool) {
	if string(v) == "null" {
		return "", true
	}
	if v[0] != '"' {
		return "", false
	}
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		if s, ok := common[string(raw)]; ok {
			return s, true
		}
		return string(raw), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// common are the strings most messages carry: the version and the
// methods of the relay's hot path. Others are copied once per message.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"2.0",
		"tools/call", "prompts/get", "resources/read", "completion/complete",
		MethodProgress, MethodMessage, MethodCancelled,
		MethodSampling, MethodElicitation, MethodRoots, "ping",
	} {
		m[s] = s
	}
	return m
}()

// errorOrNull decodes v, valid JSON, as a JSON-RPC error object.
func errorOrNull(v []byte) (*RPCError, bool) {
	if string(v) == "null" {
		return nil, true
	}
	var e struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if v[0] != '{' || json.Unmarshal(v, &e) != nil {
		return nil, false
	}
	return &RPCError{Code: e.Code, Message: e.Message, Data: e.Data}, true
}

// kind names the type of v, valid JSON, for an error (the value itself
// is the sender's and stays out of logs).
func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
