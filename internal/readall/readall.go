// Package readall reads a message body whole into a buffer the caller
// sizes. proxyd reads every message it relays whole (to check it before
// it is sent on), and a body of known length read into a buffer of that
// length plus one is never grown or copied: io.ReadAll starts from 512
// bytes, and bytes.Buffer.ReadFrom wants 512 bytes of room before each
// read, so both copy a large body at least once more.
package readall

import (
	"io"
	"slices"
)

// Into appends what r yields to buf until EOF. buf grows (about doubling)
// only when it is full, so a buffer with room for the body and one byte
// more takes it in place: the byte lets the last read see the end.
func Into(buf []byte, r io.Reader) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 512))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
