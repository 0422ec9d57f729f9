package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Host is the fixed host name of requests over the socket.
const Host = "proxyd.sock"

// VersionHeader carries the daemon's and the client's versions.
const VersionHeader = "Mcpx-Version"

// maxErrorBody caps how much of an error reply is read.
const maxErrorBody = 1 << 20

// Client talks to proxyd over its Unix socket, a method per endpoint
// (endpoints.go). Make one with NewClient.
type Client struct {
	Socket  string
	Version string // sent in VersionHeader; the daemon's comes back in DaemonVersion
	// Timeout bounds requests that are not streams (0: 30s).
	Timeout time.Duration

	httpc *http.Client
	// DaemonVersion is set after the first successful request.
	DaemonVersion string
	// OnVersionSkew, when set, is called once if the daemon's version
	// differs from Version (a CLI upgraded under a running proxyd).
	OnVersionSkew func(daemon string)
	skewTold      bool
}

// NewClient returns a client for the socket at path.
func NewClient(socket, version string) *Client {
	c := &Client{Socket: socket, Version: version}
	c.httpc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:      4,
		IdleConnTimeout:   30 * time.Second,
		DisableKeepAlives: false,
	}}
	return c
}

// NotRunningError says that no daemon answers on the socket.
type NotRunningError struct {
	Socket string
	Err    error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("cannot connect to proxyd at %s: not running? (start it with 'mcpx up')", e.Socket)
}

func (e *NotRunningError) Unwrap() error { return e.Err }

// IsNotRunning reports whether err means the daemon is not running.
func IsNotRunning(err error) bool {
	var nr *NotRunningError
	return errors.As(err, &nr)
}

// Error is an error reply of the API.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// IsCode reports whether err is an API error with the given code.
func IsCode(err error, code string) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Code == code
}

func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+Host+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Version != "" {
		req.Header.Set(VersionHeader, c.Version)
	}
	// A caller inside a trace (TRACEPARENT, as CI tools and otel-cli set
	// it) continues it through proxyd.
	if tp := os.Getenv("TRACEPARENT"); tp != "" {
		req.Header.Set("traceparent", tp)
		if ts := os.Getenv("TRACESTATE"); ts != "" {
			req.Header.Set("tracestate", ts)
		}
	}
	return req, nil
}

func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.httpc.Do(req)
	if err != nil {
		if isDialError(err) {
			return nil, &NotRunningError{Socket: c.Socket, Err: err}
		}
		return nil, fmt.Errorf("talking to proxyd at %s: %w", c.Socket, err)
	}
	if v := resp.Header.Get(VersionHeader); v != "" {
		c.DaemonVersion = v
		if c.OnVersionSkew != nil && c.Version != "" && v != c.Version && !c.skewTold {
			c.skewTold = true
			c.OnVersionSkew(v)
		}
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		var eb ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
			return nil, &Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return nil, &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("proxyd answered HTTP %d", resp.StatusCode)}
	}
	return resp, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist)
}

// do sends a JSON request and decodes a JSON reply into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding proxyd's reply to %s %s: %w", method, path, err)
	}
	return nil
}

// maxStreamLine bounds one line of an NDJSON stream.
const maxStreamLine = 16 << 20

// Stream is an NDJSON reply, read one value at a time with Next. It ends
// with the request's context; Close it when done.
type Stream[T any] struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	ctx  context.Context
	what string
}

// openStream sends a request whose reply is an NDJSON stream of T.
func openStream[T any](ctx context.Context, c *Client, method, path string, in any) (*Stream[T], error) {
	req, err := c.newRequest(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxStreamLine)
	return &Stream[T]{body: resp.Body, sc: sc, ctx: ctx, what: method + " " + path}, nil
}

// Next returns the next value; io.EOF when the stream has ended (also
// when its context ended).
func (s *Stream[T]) Next() (T, error) {
	var v T
	for s.sc.Scan() {
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &v); err != nil {
			return v, fmt.Errorf("reading proxyd's reply to %s: %w", s.what, err)
		}
		return v, nil
	}
	if err := s.sc.Err(); err != nil && s.ctx.Err() == nil {
		return v, fmt.Errorf("reading proxyd's reply to %s: %w", s.what, err)
	}
	return v, io.EOF
}

// Close ends the stream.
func (s *Stream[T]) Close() error { return s.body.Close() }
