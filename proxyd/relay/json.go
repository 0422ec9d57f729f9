package relay

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Results and params pass through as bytes; where an era needs a member
// changed, only that member is touched, so the rest stays byte for byte
// what the upstream or the client sent.

// member finds key among the members of the JSON object obj: the value
// and the byte span (key to value, without the separating comma) of its
// last occurrence, the one encoding/json takes (and with it the MCP
// library and most decoders, on either side of proxyd), and how many
// occurrences there are (0: none, or obj is not an object). A key present
// twice is a hostile peer's; proxyd reads it as the peer beyond would.
func member(obj []byte, key string) (value []byte, start, end, n int) {
	for i := openObject(obj); i >= 0; {
		k, kStart, vStart, vEnd, ok := nextMember(obj, i)
		if !ok {
			break
		}
		if string(k) == key {
			value, start, end = obj[vStart:vEnd], kStart, vEnd
			n++
		}
		i = vEnd
	}
	return value, start, end, n
}

// dropAll is obj without any member keyed key, rebuilt from its other
// members (the spaces between them are not kept): the edit of an object
// that has key more than once.
func dropAll(obj []byte, key string) []byte {
	i := openObject(obj)
	if i < 0 {
		return obj
	}
	out := append(make([]byte, 0, len(obj)), obj[:i]...)
	first := true
	for {
		k, kStart, _, vEnd, ok := nextMember(obj, i)
		if !ok {
			break
		}
		i = vEnd
		if string(k) == key {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		out = append(out, obj[kStart:vEnd]...)
		first = false
	}
	return append(out, obj[skipSpace(obj, i):]...)
}

// openObject is the index after the '{' that opens the JSON object obj,
// or -1 when obj is not an object.
func openObject(obj []byte) int {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return -1
	}
	return i + 1
}

// nextMember reads the object member at or after index i (past spaces
// and a comma): its key (without quotes, decoded if it has escapes), where
// the member starts and where its value starts and ends. ok is false at
// the object's end or on malformed input. Nothing is allocated for a key
// without escapes.
func nextMember(obj []byte, i int) (key []byte, kStart, vStart, vEnd int, ok bool) {
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != ',' {
			break
		}
		i++
	}
	if i >= len(obj) || obj[i] != '"' {
		return nil, 0, 0, 0, false
	}
	kStart = i
	kEnd := skipString(obj, i)
	if kEnd < 0 {
		return nil, 0, 0, 0, false
	}
	if key, ok = keyBytes(obj[kStart:kEnd]); !ok {
		return nil, 0, 0, 0, false
	}
	i = skipSpace(obj, kEnd)
	if i >= len(obj) || obj[i] != ':' {
		return nil, 0, 0, 0, false
	}
	vStart = skipSpace(obj, i+1)
	if vEnd = skipValue(obj, vStart); vEnd < 0 {
		return nil, 0, 0, 0, false
	}
	return key, kStart, vStart, vEnd, true
}

// keyBytes is a quoted key's text: a sub-slice when it has no escapes
// (no allocation), else decoded.
func keyBytes(raw []byte) ([]byte, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], true
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return nil, false
	}
	return []byte(k), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	// Most strings are short (keys, names): read byte by byte first, as a
	// call per string costs more than the bytes.
	j, end := i+1, min(len(b), i+1+16)
	for j < end {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			j += 2
			continue
		}
		j++
	}
	for j < len(b) {
		// A long string: its closing quote is the first one not escaped,
		// one after an even run of backslashes. IndexByte finds quotes a
		// word at a time, so a file's text or an image's base64 is not
		// read a byte at a time.
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		k := j + q
		n := 0
		for m := k - 1; m > i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return k + 1
		}
		// An escaped quote: text with escapes (JSON in a string) has one
		// every few bytes, where a call per quote costs twice a byte
		// loop. Read byte by byte until a run without escapes.
		j = k + 1
		for run := 0; run < 32; {
			if j >= len(b) {
				return -1
			}
			switch b[j] {
			case '"':
				return j + 1
			case '\\':
				j += 2
				run = 0
				continue
			}
			j++
			run++
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// Member returns the raw value of key in the JSON object obj.
func Member(obj []byte, key string) ([]byte, bool) {
	v, _, _, n := member(obj, key)
	return v, n > 0
}

// StringMember returns the string value of key ("" when absent or not a
// string).
func StringMember(obj []byte, key string) string {
	v, ok := Member(obj, key)
	if !ok {
		return ""
	}
	s, _ := String(v)
	return s
}

// IDKey is a JSON-RPC id as a map key ("s:" strings, "n:" numbers; ""
// for none, null or a malformed string).
func IDKey(id []byte) string {
	id = bytes.TrimSpace(id)
	if len(id) == 0 || string(id) == "null" {
		return ""
	}
	if id[0] == '"' {
		s, ok := String(id)
		if !ok {
			return ""
		}
		return "s:" + s
	}
	return "n:" + string(id)
}

// String decodes the JSON string v; ok is false when v is not one. A
// string without escapes is converted as it is (most names, methods and
// ids are), anything else is decoded by encoding/json.
func String(v []byte) (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	plain := true
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(v[1 : len(v)-1]), true
	}
	return s, json.Unmarshal(v, &s) == nil
}

// WithMember returns obj with key set to value (replaced in place, or
// added first; an object with key more than once keeps only the new
// member), or obj unchanged when it is not an object.
func WithMember(obj []byte, key string, value []byte) []byte {
	parts, ok := withMember(obj, key, value)
	if !ok {
		return obj
	}
	return concat(parts[:]...)
}

// withMember is WithMember's result as parts to join; ok is false when
// obj is not an object.
func withMember(obj []byte, key string, value []byte) (parts [5][]byte, ok bool) {
	switch _, start, end, n := member(obj, key); {
	case n == 1:
		return [5][]byte{obj[:start], appendKey(nil, key), value, obj[end:]}, true
	case n > 1:
		return addedFirst(dropAll(obj, key), key, value)
	}
	return addedFirst(obj, key, value)
}

// addedFirst is obj with key: value added as its first member, as parts
// to join, for a caller that knows obj has no such member; ok is false
// when obj is not an object.
func addedFirst(obj []byte, key string, value []byte) (parts [5][]byte, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return parts, false
	}
	var comma []byte
	if j := skipSpace(obj, i+1); j < len(obj) && obj[j] != '}' {
		comma = []byte{','}
	}
	return [5][]byte{obj[:i+1], appendKey(nil, key), value, comma, obj[i+1:]}, true
}

// WithoutMember returns obj without key, every occurrence of it
// (unchanged when absent).
func WithoutMember(obj []byte, key string) []byte {
	switch start, end, n := memberSpan(obj, key); {
	case n == 0:
		return obj
	case n > 1:
		return dropAll(obj, key)
	default:
		return concat(obj[:start], obj[end:])
	}
}

// appendWithoutMember appends obj without key to dst (see WithoutMember),
// finding key from ms when ms lists obj.
func appendWithoutMember(dst, obj []byte, key string, ms *Members) []byte {
	switch start, end, n := ms.memberSpan(obj, key); {
	case n == 0:
		return append(dst, obj...)
	case n > 1:
		return append(dst, dropAll(obj, key)...)
	default:
		dst = append(dst, obj[:start]...)
		return append(dst, obj[end:]...)
	}
}

// concat is the parts joined in a new buffer of exactly their length,
// which bytes.Join allocates without zeroing it first: building an edited
// copy of a large message costs one pass over it, not two.
func concat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

// memberSpan is where member key is in obj with the comma that parts it
// from its neighbour: the one after it, or else the one before it.
// n is how many times key is there; the span is the last's.
func memberSpan(obj []byte, key string) (start, end, n int) {
	if _, start, end, n = member(obj, key); n == 0 {
		return 0, 0, 0
	}
	start, end = widen(obj, start, end)
	return start, end, n
}

// widen is the member of obj from start to end with the comma that parts
// it from its neighbour (see memberSpan).
func widen(obj []byte, start, end int) (int, int) {
	j := skipSpace(obj, end)
	if j < len(obj) && obj[j] == ',' {
		return start, j + 1
	}
	k := start - 1
	for k >= 0 && (obj[k] == ' ' || obj[k] == '\t' || obj[k] == '\n' || obj[k] == '\r') {
		k--
	}
	if k >= 0 && obj[k] == ',' {
		start = k
	}
	return start, end
}

// Rewrite is WithoutMember(WithMember(obj, key, value), drop) with one
// copy of obj: the relay renames a call's target and leaves out the
// client's _meta, and the params of a call can be megabytes.
func Rewrite(obj []byte, key string, value []byte, drop string) []byte {
	return (&Edit{Key: key, Value: value, Drop: drop}).Apply(obj)
}

// Edit is a change of a request's params (Key set to Value unless Value
// is nil, then Drop removed unless it is "") that is made where the
// request is framed:
// there the edited params are the parts of the original around the
// change, joined with the envelope, so large params are copied once, into
// the request's body.
type Edit struct {
	Key   string
	Value []byte
	Drop  string
}

// Apply returns obj edited: a copy, or obj itself when the edit changes
// nothing (a nil Edit changes nothing).
func (e *Edit) Apply(obj []byte) []byte {
	parts := e.Parts(obj)
	if len(parts) == 1 {
		return parts[0]
	}
	return concat(parts...)
}

// Parts returns obj edited as parts that join to the result: sub-slices of
// obj and the new member, obj not copied. An edit that is not a plain
// cut and splice of obj (a key to add, or the same key set and dropped)
// is one part, copied.
func (e *Edit) Parts(obj []byte) [][]byte { return e.PartsWith(obj, nil) }

// PartsWith is Parts, finding Key and Drop in the list ms when it lists
// obj (see Members) rather than with a pass over obj.
func (e *Edit) PartsWith(obj []byte, ms *Members) [][]byte {
	if e == nil {
		return [][]byte{obj}
	}
	var ds, de, dn int
	if e.Drop != "" {
		ds, de, dn = ms.memberSpan(obj, e.Drop)
	}
	if e.Value == nil {
		switch dn {
		case 0:
			return [][]byte{obj}
		case 1:
			return [][]byte{obj[:ds], obj[de:]}
		}
		return [][]byte{dropAll(obj, e.Drop)}
	}
	ks, ke, kn := ms.bounds(obj, e.Key)
	kv := appendKey(nil, e.Key)
	switch {
	case kn != 1 || dn > 1 || e.Key == e.Drop:
		out := WithMember(obj, e.Key, e.Value)
		if e.Drop != "" {
			out = WithoutMember(out, e.Drop)
		}
		return [][]byte{out}
	case dn == 0:
		return [][]byte{obj[:ks], kv, e.Value, obj[ke:]}
	case ds < ks:
		return [][]byte{obj[:ds], obj[de:ks], kv, e.Value, obj[ke:]}
	}
	return [][]byte{obj[:ks], kv, e.Value, obj[ke:ds], obj[de:]}
}

func appendKey(b []byte, key string) []byte {
	return append(AppendString(b, key), ':')
}

// AppendString appends s as a JSON string. Go's quoting (strconv.Quote)
// is not JSON's: it writes \x01 and \a, which JSON has not, so a name
// or level a peer sent must not go through it.
func AppendString(b []byte, s string) []byte {
	if plainString(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// plainString: s is encoded as a JSON string by quoting it alone (ASCII
// without what encoding/json escapes).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// EachMember calls f with each member's key and its raw text (key, colon
// and value) of the JSON object obj, in order. Like EachValue, it
// allocates nothing.
func EachMember(obj []byte, f func(key, member []byte)) {
	each(obj, func(key, member, _ []byte) { f(key, member) })
}

// EachValue calls f with each member's key and raw value of the JSON
// object obj, in order. The key and value are sub-slices of obj (the key
// without its quotes, decoded if it has escapes): nothing is allocated.
func EachValue(obj []byte, f func(key, value []byte)) {
	each(obj, func(key, _, value []byte) { f(key, value) })
}

func each(obj []byte, f func(key, member, value []byte)) {
	for i := openObject(obj); i >= 0; {
		k, kStart, vStart, vEnd, ok := nextMember(obj, i)
		if !ok {
			return
		}
		f(k, obj[kStart:vEnd], obj[vStart:vEnd])
		i = vEnd
	}
}

// Fields reads the members keys of the JSON object obj in one pass:
// vals[i] is the value of keys[i], nil when absent (vals is as long as
// keys). ok is false when one of keys is ambiguous: present twice, or
// under another case. encoding/json, which most peers decode with, reads
// keys case-insensitively and keeps the last, other decoders the first
// or only exact keys; a member proxyd decides on must read the same to
// all of them. Not an object: ok, nothing found.
func Fields(obj []byte, keys []string, vals [][]byte) (ok bool) {
	clear(vals)
	for i := openObject(obj); i >= 0; {
		k, _, vStart, vEnd, found := nextMember(obj, i)
		if !found {
			break
		}
		i = vEnd
		for j, key := range keys {
			switch {
			case string(k) == key:
				if vals[j] != nil {
					return false
				}
				vals[j] = obj[vStart:vEnd]
			case foldEqual(k, key):
				return false
			}
		}
	}
	return true
}

// foldEqual reports whether k equals key under Unicode case folding (as
// encoding/json matches keys); a key of another byte length can match
// only with non-ASCII bytes (the long s, the Kelvin sign).
func foldEqual(k []byte, key string) bool {
	if len(k) != len(key) && !hasNonASCII(k) {
		return false
	}
	return bytes.EqualFold(k, []byte(key))
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
