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
	lows  = 0x7f7f7f7f7f7f7f7f
)

// scanString checks the string starting at b[i] ('"') and returns the
// index after it. Like encoding/json it refuses control characters and
// escapes JSON has not, and takes other bytes as they are (invalid UTF-8
// included).
func scanString(b []byte, i int) int {
	j := i + 1
	escapes, mark := 0, j
	for {
		if j = nextSpecial(b, j); j >= len(b) {
			return -1
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c == '\\':
			// A long string dense with escapes (JSON in a text has one
			// every few bytes) is read 64 bytes at a time once eight
			// came within 256 bytes; sparser ones (a log's line breaks)
			// are read faster between them as they are.
			if escapes++; escapes == 8 {
				if j-mark < 256 && len(b)-j >= 2*blockSize {
					return scanEscaped(b, j)
				}
				escapes, mark = 0, j
			}
			n := escapeLen(b, j)
			if n < 0 {
				return -1
			}
			j += n
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

// escapeLen is the length of the escape whose backslash is b[j], or -1
// when JSON has no such escape (or b ends inside it).
func escapeLen(b []byte, j int) int {
	if j+1 >= len(b) {
		return -1
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(b)-j >= 6 && hex4(b[j+2:j+6]) {
			return 6
		}
	}
	return -1
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// blockSize is the bytes scanEscaped reads at a time: a bit of a uint64
// for each.
const blockSize = 64

// scanEscaped goes on with the string scanString reads from b[j] on (not
// an escaped byte) and returns what scanString would. Each block of 64
// bytes becomes three masks, a bit a byte: backslashes, quotes and
// control characters. From the backslashes' runs it finds the bytes they
// escape (those after a run of odd length); the string ends at the first
// quote not escaped, and is refused at a control character before it or
// an escaped byte JSON does not allow. Bytes after the last whole block
// are left to scanString's reading.
func scanEscaped(b []byte, j int) int {
	var carry uint64 // 1: the block's first byte is escaped
	for ; len(b)-j >= blockSize; j += blockSize {
		bs, qt, anyCtl := masks((*[blockSize]byte)(b[j:]))
		escaped, next := escapedBy(bs, carry)
		end := qt &^ escaped
		var stop uint64 = ^uint64(0) // the bits before the string's end
		if end != 0 {
			stop = end&-end - 1
		}
		if anyCtl != 0 && controls(b[j:j+blockSize])&stop != 0 {
			return -1
		}
		// An escaped quote or backslash is fine; any other escaped byte
		// is checked as scanString checks it.
		for odd := escaped &^ (bs | qt) & stop; odd != 0; odd &= odd - 1 {
			if escapeLen(b, j+bits.TrailingZeros64(odd)-1) < 0 {
				return -1
			}
		}
		if end != 0 {
			return j + bits.TrailingZeros64(end) + 1
		}
		carry = next
	}
	if carry != 0 {
		j-- // the escape's backslash, for scanString to read again
	}
	return scanString(b, j-1)
}

// escapedBy returns the bits of the bytes escaped by the backslashes bs
// (the byte after each run of odd length; with carry, the first byte),
// and whether the block's last run escapes the next block's first byte.
func escapedBy(bs, carry uint64) (escaped, next uint64) {
	bs &^= carry // an escaped backslash starts no escape
	starts := bs &^ (bs << 1)
	// Adding a run's first bit carries through the run to the bit after
	// it: a run started on an even bit is of odd length when it ends
	// before an odd one, and the other way round.
	const even = 0x5555555555555555
	fromEven, _ := bits.Add64(bs, starts&even, 0)
	fromOdd, over := bits.Add64(bs, starts&^even, 0)
	escaped = (fromEven&^bs)&^even | (fromOdd&^bs)&even | carry
	return escaped, over
}

// masks returns a block's backslashes and quotes, a bit a byte, and
// whether it has a control character (not zero).
func masks(block *[blockSize]byte) (bs, qt, anyCtl uint64) {
	for k := 0; k < blockSize; k += 8 {
		x := binary.LittleEndian.Uint64(block[k : k+8])
		bs |= packHighs(zeroBytes(x^(ones*'\\'))) << k
		qt |= packHighs(zeroBytes(x^(ones*'"'))) << k
		anyCtl |= controlBytes(x)
	}
	return bs, qt, anyCtl
}

// controls has a bit for each control character of a block (they are
// rare: a block is only looked at again when it has one).
func controls(block []byte) (m uint64) {
	for k, c := range block {
		if c < 0x20 {
			m |= 1 << k
		}
	}
	return m
}

// zeroBytes flags (with its high bit) each zero byte of x, exactly.
func zeroBytes(x uint64) uint64 {
	return ^((x&^highs + lows) | x) & highs
}

// controlBytes flags (with its high bit) each byte of x below 0x20.
func controlBytes(x uint64) uint64 {
	return ^((x&^highs + ones*0x60) | x) & highs
}

// packHighs gathers the high bits of x's bytes into its low 8 bits,
// byte k's to bit k.
func packHighs(x uint64) uint64 {
	return (x >> 7) * 0x0102040810204080 >> 56
}
