package upstream

import (
	"fmt"
	"io"
	"net/http"

	"github.com/mcpx-dev/mcpx/internal/mediatype"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// limitTransport refuses response bodies larger than max bytes, so one
// runaway upstream cannot exhaust proxyd's memory. Event streams are
// exempt: they carry many messages over a long life.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	if mediatype.Of(resp.Header.Get("Content-Type")) == "text/event-stream" {
		return resp, nil
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, t.tooLarge()
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, t: t}
	return resp, nil
}

func (t limitTransport) tooLarge() error {
	return &callerr.PolicyError{Reason: fmt.Sprintf("the upstream's response is larger than max_response_bytes (%d bytes); raise it in the server's config if that is expected", t.max)}
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	t    limitTransport
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte past the limit tells a body that is exactly max long
		// from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, b.t.tooLarge()
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
