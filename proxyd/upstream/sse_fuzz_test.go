package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// longest returns the longest line (without its newline) and the longest
// event (bytes from one blank line to the next, newlines included) of an
// event stream, as the bound counts them.
func longest(stream []byte) (line, event int) {
	for _, l := range bytes.SplitAfter(stream, []byte("\n")) {
		content := bytes.TrimSuffix(l, []byte("\n"))
		line = max(line, len(content))
	}
	cur := 0
	for _, l := range bytes.SplitAfter(stream, []byte("\n")) {
		content := bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
		if len(content) == 0 && bytes.HasSuffix(l, []byte("\n")) {
			cur = 0
			continue
		}
		if string(l) == "\r" {
			continue // a lone CR at the end may yet start a blank line: not counted
		}
		cur += len(l)
		event = max(event, cur)
	}
	return line, event
}

// The transport's bound on event streams, on any bytes: it fails exactly
// when a line or an event is over the bound, and passes the stream
// through unchanged otherwise.
func FuzzBoundedStream(f *testing.F) {
	for _, s := range []string{
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"event: message\r\ndata: a\r\ndata: b\r\n\r\n",
		": ping\n\n: ping\n\n",
		"data: " + string(bytes.Repeat([]byte("x"), 100)),
		"\n\n\n\r\r\n",
		"data: a\rdata: b\n\n",
	} {
		f.Add([]byte(s), uint8(64))
	}
	f.Fuzz(func(t *testing.T, stream []byte, bound uint8) {
		max := int64(bound) + 1
		rec := &callerr.Recorder{}
		s := &boundedStream{rc: io.NopCloser(&smallReads{s: string(stream)}), max: max, rec: rec}
		got, err := io.ReadAll(s)
		line, event := longest(stream)
		over := int64(line) > max || int64(event) > max
		var le *callerr.LimitError
		switch {
		case err != nil && !errors.As(err, &le):
			t.Fatalf("read failed with %v, want a LimitError or nothing", err)
		case err != nil && !over:
			t.Fatalf("refused a stream within the bound %d (longest line %d, event %d): %v", max, line, event, err)
		case err == nil && over:
			t.Fatalf("passed a stream over the bound %d (longest line %d, event %d)", max, line, event)
		case err == nil && !bytes.Equal(got, stream):
			t.Fatal("the stream was changed on its way through")
		case err != nil && rec.Facts().Limit == nil:
			t.Fatal("the breach was not recorded")
		}
	})
}

// proxyd's own reader of relayed response streams and its JSON-RPC peek,
// on any bytes: no panic, no event over the bound.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"mcpx-1\",\"result\":{\"content\":[]}}\n\n",
		"retry: 10\nid:\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: [1]\n\n",
		"data: x\r\ndata: y\r\n",
		"id: a\x00b\ndata: z\n\n",
	} {
		f.Add([]byte(s))
	}
	const max = 200
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := newSSEReader(bytes.NewReader(stream), max)
		for range len(stream) + 1 {
			ev, err := r.next()
			if len(ev.data) > max {
				t.Fatalf("an event of %d bytes passed the bound %d", len(ev.data), max)
			}
			if err != nil {
				return
			}
			if m, err := parseMessage(bytes.Clone(ev.data)); err == nil && len(m.ID) > 0 && !json.Valid(m.ID) {
				t.Fatalf("parseMessage took id %q from %q", m.ID, ev.data)
			}
			_ = replyFor(ev.data, "mcpx-1", false)
		}
		t.Fatal("the reader returned more events than the stream has bytes")
	})
}
