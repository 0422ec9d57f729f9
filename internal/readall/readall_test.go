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
