// Package readall reads a message body whole into a buffer the caller
// sizes. proxyd reads every message it relays whole (to check it before
// it is sent on), and a body of known length read into a buffer of that
// length plus one is never grown or copied: io.ReadAll starts from 512
// bytes, and bytes.Buffer.ReadFrom wants 512 bytes of room before each
// read, so both copy a large body at least once more. A body of unknown
// length is read into pooled chunks and allocated once at its size:
// growing a buffer by doubling allocates (and zeroes) up to four times
// the body and copies it about once more anyway.
package readall

import (
	"bytes"
	"io"
	"sync"
)

// chunkSize is the size of the pooled buffers a body of unknown length
// is read into: large enough that a read takes what a socket has.
const chunkSize = 32 << 10

type chunk [chunkSize]byte

var chunks = sync.Pool{New: func() any { return new(chunk) }}

// Into appends what r yields to buf until EOF. While buf has room, r reads
// into it in place, so a buffer with room for the body and one byte more
// takes it without a copy (the byte lets the last read see the end). What
// comes after a full buffer is read into pooled chunks, and buf and the
// chunks are then copied once into a new buffer of exactly their length.
func Into(buf []byte, r io.Reader) ([]byte, error) {
	for len(buf) < cap(buf) {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return buf, eofIsEnd(err)
		}
	}
	parts := [][]byte{buf}
	var held []*chunk
	defer func() {
		for _, c := range held {
			chunks.Put(c)
		}
	}()
	var err error
	for err == nil {
		c := chunks.Get().(*chunk)
		held = append(held, c)
		n := 0
		for n < chunkSize && err == nil {
			var k int
			k, err = r.Read(c[n:])
			n += k
		}
		parts = append(parts, c[:n])
	}
	if len(parts) == 2 && len(parts[1]) == 0 {
		return buf, eofIsEnd(err) // buf held the body exactly
	}
	return bytes.Join(parts, nil), eofIsEnd(err)
}

func eofIsEnd(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}
