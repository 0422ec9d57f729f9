package upstream

import (
	"io"
	"strings"
	"testing"
)

// TestSSEReaderReused: a reader handed back mid-stream (as after an
// answer's response, its end left unread) carries nothing of that stream
// into the next answer it reads.
func TestSSEReaderReused(t *testing.T) {
	for _, tc := range []struct {
		name, first string
	}{
		{"unread events", "id: 7\nretry: 5\ndata: a1\n\ndata: LEFTOVER\n\n"},
		{"a long event", "data: " + strings.Repeat("x", 8000) + "\n\ndata: LEFTOVER\n\n"},
		{"a half line", "data: a1\n\ndata: LEFT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The pool may drop what is put back; enough rounds reuse one.
			for range 50 {
				r := newSSEReader(strings.NewReader(tc.first), 1<<20)
				if _, err := r.next(); err != nil {
					t.Fatal(err)
				}
				r.release()

				r = newSSEReader(strings.NewReader("data: b1\n\n"), 1<<20)
				ev, err := r.next()
				if err != nil || string(ev.data) != "b1" || ev.hasID || ev.hasRetry {
					t.Fatalf("first event of the next answer: %q id %v retry %v, %v", ev.data, ev.hasID, ev.hasRetry, err)
				}
				if ev, err := r.next(); err != io.EOF {
					t.Fatalf("after the next answer's only event: %q, %v; want EOF", ev.data, err)
				}
				r.release()
			}
		})
	}
}
