package relay

import "math"

// Members is where the members of one JSON object are, as the pass that
// checked the object found them: the relay reads several members of a
// call's params and of its result (a name, _meta, requestState; isError,
// resultType), each a pass over an object that can be megabytes when it
// is read afresh. A Members answers only for the object it was made
// from (the same bytes, not a copy) and only when it holds all of its
// members; for anything else its readers scan the object as Fields,
// Member and WithoutMember do. A nil *Members is such a Members.
type Members struct {
	obj []byte
	n   int
	// all: every member is listed (an object with more than fit is not).
	all bool
	at  [maxListed]span
}

// maxListed is how many members a Members lists: a call's params have
// three or four, a result five or six.
const maxListed = 8

// span is one member: its key's quoted text, its value, and where it
// begins and ends (without the comma), as offsets in the object.
type span struct{ kStart, kEnd, vStart, vEnd int32 }

// of reports whether ms lists every member of obj.
func (ms *Members) of(obj []byte) bool {
	return ms != nil && ms.all && len(obj) > 0 && len(obj) == len(ms.obj) && &obj[0] == &ms.obj[0]
}

// scanObject checks the object starting at b[i] ('{') inside depth
// objects and arrays, as scanValue does, noting its members in ms; it
// returns the index after the object, -1 when it is not valid. Its loop
// is scanValue's object loop plus the list; one loop for both, with the
// list optional, read every message's objects about a fifth slower.
func scanObject(b []byte, i, depth int, ms *Members) int {
	if depth >= maxDepth {
		return -1
	}
	*ms = Members{}
	j := skipSpace(b, i+1)
	if j < len(b) && b[j] == '}' {
		ms.obj, ms.all = b[i:j+1], true
		return j + 1
	}
	listed := len(b)-i <= math.MaxInt32
	for {
		if j >= len(b) || b[j] != '"' {
			return -1
		}
		kStart := j
		if j = scanString(b, j); j < 0 {
			return -1
		}
		kEnd := j
		if j = skipSpace(b, j); j >= len(b) || b[j] != ':' {
			return -1
		}
		vStart := skipSpace(b, j+1)
		if j = scanValue(b, vStart, depth+1); j < 0 {
			return -1
		}
		if listed && ms.n < maxListed {
			ms.at[ms.n] = span{int32(kStart - i), int32(kEnd - i), int32(vStart - i), int32(j - i)}
			ms.n++
		} else {
			listed = false
		}
		if j = skipSpace(b, j); j >= len(b) {
			return -1
		}
		switch b[j] {
		case ',':
			j = skipSpace(b, j+1)
		case '}':
			ms.obj, ms.all = b[i:j+1], listed
			return j + 1
		default:
			return -1
		}
	}
}

// key is member k's key (decoded when it has escapes); ok is false only
// for a key that does not decode, which a checked object has not.
func (ms *Members) key(k int) ([]byte, bool) {
	return keyBytes(ms.obj[ms.at[k].kStart:ms.at[k].kEnd])
}

func (ms *Members) value(k int) []byte { return ms.obj[ms.at[k].vStart:ms.at[k].vEnd] }

// Fields is Fields(obj, keys, vals), from the list when ms lists obj.
func (ms *Members) Fields(obj []byte, keys []string, vals [][]byte) bool {
	if !ms.of(obj) {
		return Fields(obj, keys, vals)
	}
	clear(vals)
	for k := range ms.n {
		key, ok := ms.key(k)
		if !ok {
			return Fields(obj, keys, vals)
		}
		for j, want := range keys {
			switch {
			case string(key) == want:
				if vals[j] != nil {
					return false
				}
				vals[j] = ms.value(k)
			case foldEqual(key, want):
				return false
			}
		}
	}
	return true
}

// find is the last member keyed key (see member): its index in the
// list, or -1, and how many there are; listed is false when ms does not
// list obj.
func (ms *Members) find(obj []byte, key string) (k, n int, listed bool) {
	if !ms.of(obj) {
		return -1, 0, false
	}
	k = -1
	for i := range ms.n {
		got, decoded := ms.key(i)
		if !decoded {
			return -1, 0, false
		}
		if string(got) == key {
			k = i
			n++
		}
	}
	return k, n, true
}

// Member is Member(obj, key), from the list when ms lists obj.
func (ms *Members) Member(obj []byte, key string) ([]byte, bool) {
	k, _, listed := ms.find(obj, key)
	switch {
	case !listed:
		return Member(obj, key)
	case k < 0:
		return nil, false
	}
	return ms.value(k), true
}

// bounds is where member key begins and ends in obj (as member finds
// it) and how many there are, from the list when ms lists obj.
func (ms *Members) bounds(obj []byte, key string) (start, end, n int) {
	k, n, listed := ms.find(obj, key)
	switch {
	case !listed:
		_, start, end, n = member(obj, key)
		return start, end, n
	case k < 0:
		return 0, 0, 0
	}
	return int(ms.at[k].kStart), int(ms.at[k].vEnd), n
}

// memberSpan is memberSpan(obj, key), from the list when ms lists obj.
func (ms *Members) memberSpan(obj []byte, key string) (start, end, n int) {
	if start, end, n = ms.bounds(obj, key); n == 0 {
		return 0, 0, 0
	}
	start, end = widen(obj, start, end)
	return start, end, n
}
