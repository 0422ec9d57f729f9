package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// kept is a POST the client library made: its URL, headers and body.
type kept struct {
	url    string
	header http.Header
	body   []byte
}

// replayer makes one session's tool call again and again without the
// client library: the request the library made, byte for byte, with a
// fresh JSON-RPC id each time, and its answer read to the end. Latency
// and throughput on the wire are measured with it: the libraries' own
// encoding and decoding cost about twice as much in the modern era as in
// the legacy one, and on a shared machine that CPU would otherwise count
// against whichever path's client is the dearer, not against the path.
type replayer struct {
	url            string
	header         http.Header
	prefix, suffix []byte // the body around the id's digits
	next           int64
	// unnotified, when set, counts answers without a progress
	// notification.
	unnotified *atomic.Int64
}

// newReplayer records one call of p on c and returns its replayer.
func newReplayer(b *testing.B, p path, c conn) (*replayer, error) {
	c.tap.keepNext()
	if !p.call(b, c).ok {
		return nil, fmt.Errorf("recording a call of %s on %s failed", p.tool, p.name)
	}
	k := c.tap.kept()
	if k == nil {
		return nil, fmt.Errorf("the call of %s on %s made no POST", p.tool, p.name)
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(k.body, &msg); err != nil || msg.Method != "tools/call" {
		return nil, fmt.Errorf("the recorded request is not a tools/call (%v): %s", err, k.body)
	}
	// The id is the first "id" key at the top level in what the library
	// writes; its value must be the number decoded above.
	at := bytes.Index(k.body, []byte(`"id":`+string(msg.ID)))
	if at < 0 || bytes.ContainsAny(msg.ID, `".`) {
		return nil, fmt.Errorf("no numeric id in the recorded request: %s", k.body)
	}
	at += len(`"id":`)
	header := k.header.Clone()
	header.Del("Content-Length")
	return &replayer{
		url:    k.url,
		header: header,
		prefix: bytes.Clone(k.body[:at]),
		suffix: bytes.Clone(k.body[at+len(msg.ID):]),
		// Far above the library's own ids in the session.
		next: 1 << 40,
	}, nil
}

// replayed calls by replaying the library's recorded call (see replayer),
// timed from sending the request to the end of its answer (on the wire).
func replayed(b *testing.B, p path) (func() sample, func()) {
	c := dial(b, p)
	r, err := newReplayer(b, p, c)
	if err != nil {
		b.Fatal(err)
	}
	r.unnotified = p.unnotified
	return func() sample {
		start := monotonic()
		t0 := time.Now()
		if err := r.call(); err != nil {
			if p.failed.Add(1) == 1 {
				b.Logf("replayed call of %s on %s: %v", p.tool, p.name, err)
			}
			return sample{start: start}
		}
		return sample{time.Since(t0), true, start}
	}, c.end
}

// call sends the request once and reads its answer, which must be a
// result that is not a tool error.
func (r *replayer) call() error {
	r.next++
	body := make([]byte, 0, len(r.prefix)+len(r.suffix)+20)
	body = append(body, r.prefix...)
	body = strconv.AppendInt(body, r.next, 10)
	body = append(body, r.suffix...)
	req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = r.header
	resp, err := replayClient.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, data)
	case !bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"isError":true`)):
		return fmt.Errorf("not a result: %.200s", data)
	}
	if r.unnotified != nil && !bytes.Contains(data, []byte(`"notifications/progress"`)) {
		r.unnotified.Add(1)
	}
	return nil
}

// replayClient shares the library clients' connection pool.
var replayClient = &http.Client{Transport: clientTransport}
