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
	b := NewBody(buf)
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// A Body is a body read in steps: a look at its head first, the rest
// later. Its bytes are read as Into reads them, and joined only when they
// are wanted, so a head read into chunks is not joined once for the look
// and again with the rest.
type Body struct {
	buf   []byte   // read into in place while it has room
	parts [][]byte // what came after buf was full, in chunks
	held  []*chunk // the chunks, back to the pool once joined
}

// NewBody starts a body in buf, whose capacity is the room it is read
// into in place. It is a value, for a caller to keep in a struct of its
// own rather than in an allocation of its own.
func NewBody(buf []byte) Body { return Body{buf: buf} }

// ReadFrom reads r until EOF, which it does not return as an error.
func (b *Body) ReadFrom(r io.Reader) (int64, error) {
	start := b.Len()
	for len(b.buf) < cap(b.buf) {
		n, err := r.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+n]
		if err != nil {
			return int64(b.Len() - start), eofIsEnd(err)
		}
	}
	var err error
	for err == nil {
		c := chunks.Get().(*chunk)
		b.held = append(b.held, c)
		n := 0
		for n < chunkSize && err == nil {
			var k int
			k, err = r.Read(c[n:])
			n += k
		}
		if n > 0 {
			b.parts = append(b.parts, c[:n])
		}
	}
	return int64(b.Len() - start), eofIsEnd(err)
}

// Len is the number of bytes read.
func (b *Body) Len() int {
	n := len(b.buf)
	for _, p := range b.parts {
		n += len(p)
	}
	return n
}

// Head copies up to n of the first bytes read.
func (b *Body) Head(n int) []byte {
	out := make([]byte, 0, min(n, b.Len()))
	for _, p := range append([][]byte{b.buf}, b.parts...) {
		out = append(out, p[:min(len(p), n-len(out))]...)
	}
	return out
}

// Bytes returns the bytes read: the buffer the body started in when they
// fit in it, else one new buffer of exactly their length (the chunks go
// back to the pool, and a later ReadFrom reads on after it).
func (b *Body) Bytes() []byte {
	if len(b.parts) > 0 {
		b.buf = bytes.Join(append([][]byte{b.buf}, b.parts...), nil)
		b.parts = nil
	}
	for _, c := range b.held {
		chunks.Put(c)
	}
	b.held = nil
	return b.buf
}

func eofIsEnd(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}
