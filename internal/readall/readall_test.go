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
	broken := errors.New("connection reset")
	for _, tt := range []struct {
		name    string
		r       io.Reader
		size    int // the buffer's capacity
		want    string
		err     error
		inPlace bool // the bytes are in the given buffer
	}{
		{name: "sized one over", r: strings.NewReader(long), size: len(long) + 1, want: long, inPlace: true},
		{name: "sized exactly", r: strings.NewReader(long), size: len(long), want: long},
		{name: "unknown length", r: strings.NewReader(long), size: 0, want: long},
		{name: "one byte at a time", r: iotest.OneByteReader(strings.NewReader(long)), size: len(long) + 1, want: long, inPlace: true},
		{name: "empty", r: strings.NewReader(""), size: 1, want: "", inPlace: true},
		{name: "broken off", r: io.MultiReader(strings.NewReader("{\"res"), iotest.ErrReader(broken)), size: 512, want: "{\"res", err: broken, inPlace: true},
		{name: "data with EOF", r: iotest.DataErrReader(strings.NewReader(long)), size: len(long) + 1, want: long, inPlace: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 0, tt.size)
			got, err := Into(buf, tt.r)
			if string(got) != tt.want || !errors.Is(err, tt.err) {
				t.Fatalf("Into = %d bytes, %v; want %d bytes, %v", len(got), err, len(tt.want), tt.err)
			}
			if tt.inPlace && cap(got) != cap(buf) {
				t.Errorf("the buffer grew from %d to %d bytes", cap(buf), cap(got))
			}
		})
	}
}
