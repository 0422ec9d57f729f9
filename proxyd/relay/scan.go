package relay

import (
	"encoding/binary"
	"math/bits"
)

// The relay checks every message it carries as encoding/json.Valid would
// (the MCP library on either side decodes with encoding/json), and reads
// a message's members in the same pass: a check apart from the read was a
// second pass over every byte, and a large message's bytes are most of
// what proxyd spends on it. FuzzValid holds the check to encoding/json's.

// maxDepth is encoding/json's limit on nested objects and arrays.
const maxDepth = 10000

// Valid reports whether b is one JSON value, exactly as encoding/json.Valid
// decides.
func Valid(b []byte) bool {
	end := scanValue(b, skipSpace(b, 0), 0)
	return end >= 0 && skipSpace(b, end) == len(b)
}

// scanValue checks the JSON value starting at b[i], inside depth objects
// and arrays, and returns the index after it; -1 when it is not valid. It
// recurses once per level, so a message nested to the limit takes about
// 1 MB of stack while it is read (a frame is under 100 bytes).
func scanValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return scanString(b, i)
	case '{':
		if depth >= maxDepth {
			return -1
		}
		j := skipSpace(b, i+1)
		if j < len(b) && b[j] == '}' {
			return j + 1
		}
		for {
			if j >= len(b) || b[j] != '"' {
				return -1
			}
			if j = scanString(b, j); j < 0 {
				return -1
			}
			if j = skipSpace(b, j); j >= len(b) || b[j] != ':' {
				return -1
			}
			if j = scanValue(b, skipSpace(b, j+1), depth+1); j < 0 {
				return -1
			}
			if j = skipSpace(b, j); j >= len(b) {
				return -1
			}
			switch b[j] {
			case ',':
				j = skipSpace(b, j+1)
			case '}':
				return j + 1
			default:
				return -1
			}
		}
	case '[':
		if depth >= maxDepth {
			return -1
		}
		j := skipSpace(b, i+1)
		if j < len(b) && b[j] == ']' {
			return j + 1
		}
		for {
			if j = scanValue(b, j, depth+1); j < 0 {
				return -1
			}
			if j = skipSpace(b, j); j >= len(b) {
				return -1
			}
			switch b[j] {
			case ',':
				j = skipSpace(b, j+1)
			case ']':
				return j + 1
			default:
				return -1
			}
		}
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	}
	return scanNumber(b, i)
}

func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanNumber checks the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// scanString checks the string starting at b[i] ('"') and returns the
// index after it. Like encoding/json it refuses control characters and
// escapes JSON has not, and takes other bytes as they are (invalid UTF-8
// included).
func scanString(b []byte, i int) int {
	j := i + 1
	for {
		if j = nextSpecial(b, j); j >= len(b) {
			return -1
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c == '\\':
			if j+1 >= len(b) {
				return -1
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if len(b)-j < 6 || !hex4(b[j+2:j+6]) {
					return -1
				}
				j += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

// nextSpecial is the index of the first quote, backslash or control
// character in b from j on (len(b) when there is none). Most strings are
// short, and escapes come in runs (JSON in a text has one every few
// bytes): the first bytes are read one at a time, the rest of a long
// stretch eight at a time.
func nextSpecial(b []byte, j int) int {
	for end := min(j+16, len(b)); j < end; j++ {
		if special[b[j]] {
			return j
		}
	}
	for j+16 <= len(b) {
		// Each test flags the first byte it looks for exactly (a false
		// flag is only ever above a true one), so the lowest flag of the
		// three is the first byte to stop at.
		m1 := stops(binary.LittleEndian.Uint64(b[j:]))
		m2 := stops(binary.LittleEndian.Uint64(b[j+8:]))
		if m1|m2 != 0 {
			if m1 != 0 {
				return j + bits.TrailingZeros64(m1)/8
			}
			return j + 8 + bits.TrailingZeros64(m2)/8
		}
		j += 16
	}
	for ; j < len(b); j++ {
		if special[b[j]] {
			return j
		}
	}
	return j
}

// stops flags (with its high bit) each byte of x that is a quote, a
// backslash or a control character, exactly from the lowest on.
func stops(x uint64) uint64 {
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((q-ones)&^q | (s-ones)&^s | (x-ones*0x20)&^x) & highs
}

// special marks the bytes a string's scan stops at.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
