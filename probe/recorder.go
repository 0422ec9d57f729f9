package probe

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/httppolicy"
	"github.com/mcpx-dev/mcpx/internal/redact"
)

// exchange is one HTTP request/response seen by the probe.
type exchange struct {
	Method      string  `json:"method"`
	RPC         string  `json:"rpc,omitempty"`
	URL         string  `json:"url"`
	Status      int     `json:"status,omitempty"`
	Proto       string  `json:"proto,omitempty"`
	ContentType string  `json:"content_type,omitempty"`
	Server      string  `json:"server,omitempty"`
	Location    string  `json:"location,omitempty"`
	SessionID   bool    `json:"session_id,omitempty"`
	DurationMS  float64 `json:"duration_ms"`
	Error       string  `json:"error,omitempty"`

	err     error
	wwwAuth []string
	body    *snippet
	start   time.Time
}

// snippet keeps the first bytes of a body as the client reads it.
type snippet struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const snippetMax = 1024

func (s *snippet) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type teeBody struct {
	io.ReadCloser
	s *snippet
}

func (t teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.s.mu.Lock()
		if room := snippetMax - t.s.buf.Len(); room > 0 {
			t.s.buf.Write(p[:min(n, room)])
		}
		t.s.mu.Unlock()
	}
	return n, err
}

// redirectHop is a redirect the client was offered.
type redirectHop struct {
	Status  int    `json:"status"`
	From    string `json:"from"`
	To      string `json:"to"`
	Refused string `json:"refused,omitempty"`
}

// recorder is the outermost RoundTripper of the probe's HTTP client: it
// records every exchange so that statuses survive the MCP library, which
// flattens them into text.
type recorder struct {
	base      http.RoundTripper
	mu        sync.Mutex
	exchanges []*exchange
	redirects []redirectHop
}

func (rc *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	e := &exchange{Method: req.Method, URL: redact.URL(req.URL.String()), start: time.Now(), body: &snippet{}}
	if req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			var m struct {
				Method string `json:"method"`
			}
			if json.NewDecoder(io.LimitReader(b, 1<<16)).Decode(&m) == nil {
				e.RPC = m.Method
			}
			b.Close()
		}
	}
	rc.mu.Lock()
	rc.exchanges = append(rc.exchanges, e)
	rc.mu.Unlock()

	resp, err := rc.base.RoundTrip(req)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e.DurationMS = ms(time.Since(e.start))
	if err != nil {
		e.err = err
		e.Error = err.Error()
		return nil, err
	}
	e.Status = resp.StatusCode
	e.Proto = resp.Proto
	e.ContentType = resp.Header.Get("Content-Type")
	e.Server = resp.Header.Get("Server")
	e.SessionID = resp.Header.Get("Mcp-Session-Id") != ""
	e.wwwAuth = resp.Header.Values("WWW-Authenticate")
	if loc := resp.Header.Get("Location"); loc != "" {
		if lu, perr := req.URL.Parse(loc); perr == nil {
			e.Location = redact.URL(lu.String())
		}
	}
	if !isRPCContent(e.ContentType) {
		// The MCP library may close such a body unread; keep its start
		// for the report.
		head := make([]byte, snippetMax)
		n, _ := io.ReadFull(resp.Body, head)
		e.body.buf.Write(head[:n])
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head[:n]), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body = teeBody{ReadCloser: resp.Body, s: e.body}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (rc *recorder) CloseIdleConnections() {
	if ci, ok := rc.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (rc *recorder) snapshot() ([]*exchange, []redirectHop) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]*exchange, len(rc.exchanges))
	copy(out, rc.exchanges)
	return out, append([]redirectHop(nil), rc.redirects...)
}

// checkRedirect records each hop and follows it when httppolicy.Redirect
// does (the policy proxyd's upstream client follows); a refused hop ends
// the request with the redirect as its response.
func (rc *recorder) checkRedirect(req *http.Request, via []*http.Request) error {
	prev := via[len(via)-1]
	hop := redirectHop{From: redact.URL(prev.URL.String()), To: redact.URL(req.URL.String())}
	if req.Response != nil {
		hop.Status = req.Response.StatusCode
	}
	if err := (httppolicy.Redirect{}).Check(req, via); err != nil {
		hop.Refused = strings.TrimPrefix(err.Error(), httppolicy.ErrRedirectRefused.Error()+": ")
	}
	rc.mu.Lock()
	rc.redirects = append(rc.redirects, hop)
	rc.mu.Unlock()
	if hop.Refused != "" {
		return http.ErrUseLastResponse
	}
	return nil
}
