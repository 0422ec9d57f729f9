package readall

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestInto(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	huge := strings.Repeat("0123456789abcdef", 7<<10) // three and a half chunks
	broken := errors.New("connection reset")
	for _, tt := range []struct {
		name    string
		r       io.Reader
		size    int // the buffer's capacity
		want    string
		err     error
		inPlace bool // the bytes are in the given buffer
		exact   bool // else they are in a buffer of exactly their length
	}{
		{name: "sized one over", r: strings.NewReader(long), size: len(long) + 1, want: long, inPlace: true},
		{name: "sized exactly", r: strings.NewReader(long), size: len(long), want: long, inPlace: true},
		{name: "unknown length", r: strings.NewReader(long), size: 0, want: long, exact: true},
		{name: "unknown length, chunks", r: strings.NewReader(huge), size: 0, want: huge, exact: true},
		{name: "longer than the buffer", r: strings.NewReader(huge), size: 512, want: huge, exact: true},
		{name: "unknown length, one byte at a time", r: iotest.OneByteReader(strings.NewReader(huge)), size: 0, want: huge, exact: true},
		{name: "unknown length, half reads", r: iotest.HalfReader(strings.NewReader(huge)), size: 100, want: huge, exact: true},
		{name: "one byte at a time", r: iotest.OneByteReader(strings.NewReader(long)), size: len(long) + 1, want: long, inPlace: true},
		{name: "empty", r: strings.NewReader(""), size: 1, want: "", inPlace: true},
		{name: "broken off", r: io.MultiReader(strings.NewReader("{\"res"), iotest.ErrReader(broken)), size: 512, want: "{\"res", err: broken, inPlace: true},
		{name: "data with EOF", r: iotest.DataErrReader(strings.NewReader(long)), size: len(long) + 1, want: long, inPlace: true},
		{name: "data with EOF, chunks", r: iotest.DataErrReader(strings.NewReader(huge)), size: 0, want: huge, exact: true},
		{name: "broken off in the chunks", r: io.MultiReader(strings.NewReader(huge), iotest.ErrReader(broken)), size: 16, want: huge, err: broken, exact: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 0, tt.size)
			got, err := Into(buf, tt.r)
			if string(got) != tt.want || !errors.Is(err, tt.err) {
				t.Fatalf("Into = %d bytes, %v; want %d bytes, %v", len(got), err, len(tt.want), tt.err)
			}
			if tt.inPlace && (cap(got) != cap(buf) || len(got) > 0 && &got[0] != &buf[:1][0]) {
				t.Errorf("the body is not in the given buffer (capacity %d, now %d)", cap(buf), cap(got))
			}
			if tt.exact && cap(got) != len(got) {
				t.Errorf("the body's %d bytes are in a buffer of %d", len(got), cap(got))
			}
		})
	}
}

// A body read in steps (a limited head, then the rest) holds the same
// bytes as one read whole, in the given buffer while they fit, else in
// one buffer of exactly their length; Head copies its first bytes
// wherever they are.
func TestBodyInSteps(t *testing.T) {
	huge := strings.Repeat("0123456789abcdef", 7<<10) // three and a half chunks
	for _, tt := range []struct {
		name       string
		size, head int // the buffer's capacity; the first step's length
		inPlace    bool
	}{
		{name: "unknown length, head in chunks", size: 0, head: 64<<10 + 1},
		{name: "unknown length, short head", size: 0, head: 10},
		{name: "sized for the body", size: len(huge) + 1, head: 64<<10 + 1, inPlace: true},
		{name: "head past the buffer", size: 100, head: 40 << 10},
		{name: "head is the body", size: 0, head: len(huge) + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 0, tt.size)
			b := NewBody(buf)
			r := strings.NewReader(huge)
			if _, err := b.ReadFrom(io.LimitReader(r, int64(tt.head))); err != nil {
				t.Fatal(err)
			}
			want := huge[:min(tt.head, len(huge))]
			if b.Len() != len(want) || string(b.Head(600)) != want[:min(600, len(want))] {
				t.Fatalf("after the head: Len %d, Head %.20q; want %d, %.20q", b.Len(), b.Head(600), len(want), want)
			}
			n, err := b.ReadFrom(r)
			if err != nil || int(n) != len(huge)-len(want) {
				t.Fatalf("the rest: %d bytes, %v; want %d", n, err, len(huge)-len(want))
			}
			got := b.Bytes()
			if string(got) != huge {
				t.Fatalf("Bytes = %d bytes, want %d", len(got), len(huge))
			}
			if tt.inPlace != (cap(got) == cap(buf) && &got[0] == &buf[:1][0]) {
				t.Errorf("in the given buffer: %v, want %v", !tt.inPlace, tt.inPlace)
			}
			if !tt.inPlace && cap(got) != len(got) {
				t.Errorf("the body's %d bytes are in a buffer of %d", len(got), cap(got))
			}
			if again := b.Bytes(); &again[0] != &got[0] || len(again) != len(got) {
				t.Error("Bytes a second time is not the same buffer")
			}
		})
	}
}
