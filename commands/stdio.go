package commands

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/retryafter"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var stdioCommand = &cli.Command{
	Name:  "stdio",
	Usage: "bridge a stdio MCP client to proxyd",
	Description: `Speaks MCP (newline-delimited JSON-RPC) on stdin/stdout and passes every
message unchanged to proxyd's aggregated server over the control socket,
and everything proxyd sends back (responses, notifications such as
progress, requests such as elicitation) to stdout. Point a client that
only launches stdio servers at this command; no token is needed because
only your user can open the socket. Logs go to stderr.

If proxyd restarts ('mcpx down && mcpx up'), the bridge waits for it (up to
--reconnect-wait) and re-establishes the client's session by replaying the
client's initialize, log level and resource subscriptions, so the client
notices nothing; a request sent while
proxyd is stopping waits for the next one, and a request that was
running when proxyd went away gets an error. If proxyd does not come back,
or the new proxyd negotiates another protocol version, the bridge says why
on stderr and exits, so the client can relaunch it.

Examples:
   mcpx stdio
   {"command": "mcpx", "args": ["stdio"]}   (in a client's server list)`,
	Flags: []cli.Flag{
		&cli.DurationFlag{Name: "reconnect-wait", Value: 30 * time.Second, Usage: "wait up to `DURATION` for a restarted proxyd"},
	},
	Action: runStdio,
}

func runStdio(c *cli.Context) error {
	sock := socketPath(c)
	cl := newClient(c)
	if _, err := cl.Status(c.Context); err != nil {
		return daemonErr(err)
	}
	b := &bridge{
		hc: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
			// Each message on its own connection: a kept one may lead to a
			// proxyd that has since stopped (its server drops a request
			// read during its shutdown, unanswered), where a new one
			// reaches whichever proxyd holds the socket now.
			DisableKeepAlives: true,
			// See expectContinueOver.
			ExpectContinueTimeout: time.Second,
		}},
		status: cl.Status,
		url:    api.MCPEndpoint,
		out:    c.App.Writer,
		log:    c.App.ErrWriter,
		wait:   c.Duration("reconnect-wait"),
		fatal:  make(chan error, 1),
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	return b.run(ctx, os.Stdin)
}

// bridge passes newline-delimited JSON-RPC between a stdio client and
// proxyd's MCP endpoint, as bytes.
type bridge struct {
	hc     *http.Client
	status func(context.Context) (*api.Status, error)
	url    string
	out    io.Writer
	log    io.Writer
	wait   time.Duration

	outMu sync.Mutex
	wg    sync.WaitGroup
	fatal chan error

	mu sync.Mutex
	// The client's legacy-era session: its initialize (replayed after a
	// restart), the negotiated version, proxyd's session id, and a
	// generation counting re-establishments.
	initParams json.RawMessage
	version    string
	sid        string
	gen        int
	initDone   bool
	stopGET    context.CancelFunc
	replays    int // requests the bridge made itself, for their ids
	// life is the bridge's own context: a re-established session and its
	// stream outlive the request that found the old one gone.
	life context.Context

	// What the client set on its legacy session, replayed on a new one:
	// its log level (logging/setLevel params) and its resource
	// subscriptions (resources/subscribe params by URI). Its own lock:
	// the reader notes them and must not wait for a re-establishment.
	stateMu sync.Mutex
	level   json.RawMessage
	subs    map[string]json.RawMessage
	// inflight cancels a modern client's request by its id (its
	// notifications/cancelled closes the request's stream).
	inflight map[string]context.CancelFunc
}

// line writes one message to the client.
func (b *bridge) line(msg []byte) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	_, _ = b.out.Write(append(bytes.TrimSpace(msg), '\n'))
}

func (b *bridge) errorReply(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		return
	}
	b.line(errorLine(id, code, msg))
}

// errorLine is a JSON-RPC error answer to id (null when nil). msg is
// encoded by encoding/json: it may hold what proxyd or the client sent,
// and Go's quoting of it (\x01) is not JSON.
func errorLine(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + string(e) + `}`)
}

// message is the part of a client message the bridge looks at.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (b *bridge) run(ctx context.Context, in io.Reader) error {
	b.life = ctx
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64*1024), 64<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
		readErr <- sc.Err()
	}()
	defer b.stopListening()
	for {
		select {
		case err := <-b.fatal:
			fmt.Fprintf(b.log, "mcpx stdio: %v\n", err)
			return silentExit(ExitProxydNotRunning)
		case err := <-readErr:
			b.wg.Wait()
			return err
		case line := <-lines:
			b.handle(ctx, line)
		}
	}
}

func (b *bridge) handle(ctx context.Context, line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		b.line(errorLine(nil, -32700, "parse error: "+err.Error()))
		return
	}
	switch {
	case m.Method == string(mcp.MethodInitialize) && len(m.ID) > 0:
		// Nothing may overtake the handshake: it creates the session.
		b.initialize(ctx, line, m)
	case m.Method != "" && len(m.ID) > 0:
		b.remember(m)
		b.wg.Add(1)
		go func() { defer b.wg.Done(); b.request(ctx, line, m) }()
	case m.Method == string(mcp.MethodNotificationCancelled) && b.cancelModern(m.Params):
		// A modern client's cancellation: closing the request's stream is
		// how the HTTP endpoint hears it.
	default:
		// Notifications and the client's answers to proxyd's requests.
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			resp, err := b.send(ctx, line, m)
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
			}
			if m.Method == string(mcp.MethodNotificationInitialized) {
				b.mu.Lock()
				b.initDone = true
				b.mu.Unlock()
				b.listen(ctx)
			}
		}()
	}
}

// remember notes what a legacy client sets on its session (see
// bridge.level, bridge.subs), in the order the client sent it.
func (b *bridge) remember(m message) {
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodSetLogLevel, mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
	default:
		return
	}
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(m.Params, &p)
	b.stateMu.Lock()
	defer b.stateMu.Unlock()
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodSetLogLevel:
		b.level = m.Params
	case mcp.MethodResourcesSubscribe:
		if b.subs == nil {
			b.subs = map[string]json.RawMessage{}
		}
		b.subs[p.URI] = m.Params
	case mcp.MethodResourcesUnsubscribe:
		delete(b.subs, p.URI)
	}
}

// initialize passes the client's initialize and remembers it, the
// negotiated version and the session for a later replay.
func (b *bridge) initialize(ctx context.Context, line []byte, m message) {
	resp, err := b.send(ctx, line, m)
	if err != nil {
		b.errorReply(m.ID, mcp.INTERNAL_ERROR, "proxyd: "+sendErrText(err))
		return
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	var result struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	b.copyResponse(resp, m.ID, func(msg []byte) {
		if bytes.Contains(msg, []byte(`"protocolVersion"`)) {
			_ = json.Unmarshal(msg, &result)
		}
	})
	b.mu.Lock()
	b.initParams, b.sid, b.version = m.Params, sid, result.Result.ProtocolVersion
	b.mu.Unlock()
}

// request passes one client request and relays everything proxyd sends
// for it.
func (b *bridge) request(ctx context.Context, line []byte, m message) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := string(m.ID)
	b.mu.Lock()
	if b.inflight == nil {
		b.inflight = map[string]context.CancelFunc{}
	}
	b.inflight[key] = cancel
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inflight, key)
		b.mu.Unlock()
	}()
	resp, err := b.send(ctx, line, m)
	if err != nil {
		if ctx.Err() == nil {
			b.errorReply(m.ID, mcp.INTERNAL_ERROR, "proxyd: "+sendErrText(err))
		}
		return
	}
	if !b.copyResponse(resp, m.ID, nil) && ctx.Err() == nil {
		b.errorReply(m.ID, mcp.INTERNAL_ERROR, "proxyd: the connection to proxyd broke during the request (proxyd restarted?); the request may or may not have run")
	}
}

// cancelModern closes the stream of a modern client's request named by a
// notifications/cancelled; false when the client is not modern or no such
// request runs.
func (b *bridge) cancelModern(params json.RawMessage) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.initParams != nil {
		return false // legacy: proxyd takes the notification itself
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	cancel, ok := b.inflight[string(bytes.TrimSpace(p.RequestID))]
	if ok {
		cancel()
	}
	return ok
}

// send posts a message to proxyd. When proxyd did not take it (see
// unsent), the session is re-established and the message sent again: it
// never ran.
func (b *bridge) send(ctx context.Context, line []byte, m message) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		sid, version, gen := b.sid, b.version, b.gen
		b.mu.Unlock()
		resp, err := b.post(ctx, line, m, sid, version)
		why := unsent(resp, err, sid)
		if why == nil {
			return resp, err
		}
		if resp != nil {
			resp.Body.Close()
		}
		if attempt > 0 || m.Method == string(mcp.MethodInitialize) && errors.Is(why, errSessionLost) {
			return nil, why
		}
		if err := b.reestablish(gen); err != nil {
			b.die(err)
			return nil, err
		}
	}
}

var (
	errProxydStopping = errors.New("proxyd is stopping and refused the message")
	errSessionLost    = errors.New("proxyd does not know the session (HTTP 404)")
)

// unsent tells why proxyd did not take a message, which can then be sent
// again: it is gone (no socket, nobody listening), it is stopping (it
// refused the message before anything ran), or it does not know the
// session (it restarted). nil: proxyd took the message, or it cannot be
// told whether it did.
func unsent(resp *http.Response, err error, sid string) error {
	switch {
	case err != nil:
		if daemonGone(err) {
			return err
		}
		return nil
	case resp.StatusCode == http.StatusNotFound && sid != "":
		return errSessionLost
	case resp.StatusCode == http.StatusServiceUnavailable:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var eb api.ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error.Code == api.CodeStopping {
			return errProxydStopping
		}
	}
	return nil
}

func (b *bridge) post(ctx context.Context, line []byte, m message, sid, version string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(line))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if len(line) > expectContinueOver {
		req.Header.Set("Expect", "100-continue")
	}
	if v := metaProtocolVersion(m.Params); mcp.IsModernProtocol(v) {
		req.Header.Set("Mcp-Protocol-Version", v)
		for k, val := range mcp.StandardHeaders(v, mcp.MCPMethod(m.Method), m.Params) {
			req.Header.Set(k, val)
		}
	} else {
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
	}
	return b.hc.Do(req)
}

// sendErrText words a failed send for the client.
func sendErrText(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "proxyd closed the connection without answering (it stopped or crashed?); the request may or may not have run"
	}
	return err.Error()
}

// expectContinueOver is the message size above which the bridge asks
// before sending the body: proxyd refuses a body over its
// limits.max_request_bytes unread and closes the connection, and a
// client still writing it gets a broken pipe instead of the refusal.
// Asking first costs a round trip on the socket, small beside such a
// body.
const expectContinueOver = 64 << 10

// daemonGone reports a failure to reach proxyd at all: no socket file, or
// nobody listening on it.
func daemonGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNRESET)
}

// copyResponse writes proxyd's answer to the client: a JSON body as one
// line, an SSE stream event by event (also passed to seen). It reports
// whether the answer arrived whole.
func (b *bridge) copyResponse(resp *http.Response, id json.RawMessage, seen func([]byte)) bool {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		return true
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return false
		}
		if resp.StatusCode >= 400 {
			if line := refusal(id, resp.StatusCode, body); line != nil {
				b.line(line)
				return true
			}
		}
		if json.Valid(body) {
			if seen != nil {
				seen(body)
			}
			b.line(body)
			return true
		}
		b.line(errorLine(nil, -32603, fmt.Sprintf("proxyd answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))))
		return true
	}
	complete := false
	err := readEvents(resp.Body, func(data []byte) {
		if seen != nil {
			seen(data)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(data, &m) == nil && m.Method == "" && len(m.ID) > 0 {
			complete = true
		}
		b.line(data)
	})
	return err == nil && complete
}

// refusal words proxyd's refusal of the request id (an HTTP error) as the
// answer to it, where the body as it is would leave the client waiting:
// a JSON-RPC error without the id (a body over limits is refused unread)
// or the control API's error shape, which is no JSON-RPC message. nil:
// the body answers the request as it is, or is no error of either kind.
func refusal(id json.RawMessage, status int, body []byte) []byte {
	if len(id) == 0 {
		return nil
	}
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return nil
	}
	var code int
	if json.Unmarshal(m.Error.Code, &code) != nil {
		// The control API's {"error":{"code":"stopping",...}}.
		return errorLine(id, mcp.INTERNAL_ERROR, fmt.Sprintf("proxyd answered HTTP %d: %s", status, m.Error.Message))
	}
	if len(m.ID) > 0 && string(m.ID) != "null" {
		return nil
	}
	return errorLine(id, code, m.Error.Message)
}

// readEvents calls f with the data of each event of an SSE stream.
func readEvents(r io.Reader, f func([]byte)) error {
	br := bufio.NewReaderSize(r, 64*1024)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case len(line) == 0:
				if len(data) > 0 {
					f(data)
					data = nil
				}
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
		if err != nil {
			if len(data) > 0 {
				f(data)
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// reestablish waits for proxyd to come back and, for a legacy-era client,
// replays its initialize on a new session and then what it set on the old
// one. It runs in the bridge's context, not the caller's request's: the
// session serves every request after it. gen is the session generation
// the caller saw fail: if another request re-established it meanwhile,
// there is nothing to do.
func (b *bridge) reestablish(gen int) error {
	ctx := b.life
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen != gen {
		return nil
	}
	fmt.Fprintf(b.log, "mcpx stdio: lost proxyd's session (proxyd restarted?); waiting up to %s for proxyd\n", b.wait)
	if err := awaitProxyd(ctx, b.status, time.Now().Add(b.wait)); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("proxyd did not come back within %s (%v); exiting so the client can start the bridge again", b.wait, err)
	}
	b.gen++
	if b.initParams == nil {
		return nil // a modern client has no session
	}
	if b.stopGET != nil {
		b.stopGET()
		b.stopGET = nil
	}
	r, err := b.replay(ctx, mcp.MethodInitialize, b.initParams)
	if err != nil {
		return fmt.Errorf("replaying the client's initialize to the new proxyd: %w", err)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	switch {
	case r.err != "":
		return fmt.Errorf("the new proxyd refused the replayed initialize: %s; exiting so the client can start again", r.err)
	case r.result == nil || r.sid == "" || json.Unmarshal(r.result, &res) != nil:
		return fmt.Errorf("the new proxyd gave no session for the replayed initialize (HTTP %d); exiting so the client can start again", r.status)
	case res.ProtocolVersion != b.version:
		return fmt.Errorf("the new proxyd negotiated protocol %s where the client's session had %s; exiting so the client can start again",
			res.ProtocolVersion, b.version)
	}
	b.sid = r.sid
	note := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp, err := b.post(ctx, note, message{Method: string(mcp.MethodNotificationInitialized)}, b.sid, b.version); err == nil {
		resp.Body.Close()
	}
	// What the client set on its old session, so the new one serves it
	// the same: its log level, then its subscriptions.
	b.stateMu.Lock()
	level, subs := b.level, maps.Clone(b.subs)
	b.stateMu.Unlock()
	what := "the client's initialize"
	if level != nil {
		b.replaySet(ctx, mcp.MethodSetLogLevel, level)
		what += " and log level"
	}
	for _, uri := range slices.Sorted(maps.Keys(subs)) {
		b.replaySet(ctx, mcp.MethodResourcesSubscribe, subs[uri])
	}
	if n := len(subs); n > 0 {
		what += fmt.Sprintf(", %d resource subscription(s)", n)
	}
	fmt.Fprintf(b.log, "mcpx stdio: re-established the session with the new proxyd (replayed %s)\n", what)
	if b.initDone {
		go b.listen(ctx)
	}
	return nil
}

// replaySet sends one piece of the client's session state to the new
// session; a refusal is said on stderr (the client's own request had
// been answered).
func (b *bridge) replaySet(ctx context.Context, method mcp.MCPMethod, params json.RawMessage) {
	r, err := b.replay(ctx, method, params)
	switch {
	case err != nil:
		fmt.Fprintf(b.log, "mcpx stdio: replaying the client's %s to the new proxyd: %v\n", method, err)
	case r.err != "":
		fmt.Fprintf(b.log, "mcpx stdio: the new proxyd refused the client's replayed %s: %s\n", method, r.err)
	}
}

// replayed is proxyd's answer to a request the bridge made itself.
type replayed struct {
	status int
	sid    string
	result json.RawMessage
	err    string // the JSON-RPC error's message
}

// replay sends a request of the bridge's own (on the current session,
// none for initialize) and reads the answer, JSON or SSE. b.mu is held.
func (b *bridge) replay(ctx context.Context, method mcp.MCPMethod, params json.RawMessage) (replayed, error) {
	b.replays++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcpx-stdio-replay-" + strconv.Itoa(b.replays),
		"method": method, "params": params})
	sid, version := b.sid, b.version
	if method == mcp.MethodInitialize {
		sid, version = "", ""
	}
	resp, err := b.post(ctx, body, message{Method: string(method)}, sid, version)
	if err != nil {
		return replayed{}, err
	}
	defer resp.Body.Close()
	r := replayed{status: resp.StatusCode, sid: resp.Header.Get("Mcp-Session-Id")}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	read := func(d []byte) {
		if json.Unmarshal(d, &msg) == nil && (msg.Result != nil || msg.Error != nil) {
			r.result = msg.Result
			if msg.Error != nil {
				r.err = msg.Error.Message
			}
		}
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		_ = readEvents(bytes.NewReader(raw), read)
	} else {
		read(raw)
	}
	if r.result == nil && r.err == "" && resp.StatusCode >= 300 {
		r.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return r, nil
}

// listen keeps a legacy session's GET stream open and passes what comes
// on it (resource updates, list changes, log messages) to the client.
func (b *bridge) listen(parent context.Context) {
	b.mu.Lock()
	if b.initParams == nil || b.sid == "" || b.stopGET != nil {
		b.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(parent)
	b.stopGET = cancel
	sid, version, gen := b.sid, b.version, b.gen
	b.mu.Unlock()
	go func() {
		refusals := 0 // GETs in a row proxyd answered without a stream
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
			if err != nil {
				return
			}
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", version)
			resp, err := b.hc.Do(req)
			var asked time.Duration // a refusal's Retry-After
			if err != nil {
				// Not answered at all, proxyd is away: its return is
				// looked for every second.
				refusals = 0
			} else {
				if resp.StatusCode == http.StatusOK {
					_ = readEvents(resp.Body, b.line)
					refusals = 0
				} else {
					refusals++
					asked = retryafter.FromResponse(resp, time.Now())
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusNotFound {
					// proxyd restarted (or ended the session): re-establish
					// it now, not at the client's next request, so what
					// the client subscribed to reaches it meanwhile. The
					// new session gets a stream of its own.
					if err := b.reestablish(gen); err != nil {
						b.die(err)
					}
					return
				}
				if resp.StatusCode == http.StatusMethodNotAllowed {
					return
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(listenRetry(refusals, asked)):
			}
		}
	}()
}

// maxListenRetry bounds the bridge's wait between GETs.
const maxListenRetry = 30 * time.Second

// listenRetry is how long the bridge waits before it opens its GET stream
// again after refusals answers in a row that opened none (0: the stream
// opened and ended, or proxyd did not answer): what a refusal's
// Retry-After asks (proxyd's at its cap of open streams), else a second,
// doubling with each refusal; at most maxListenRetry either way.
func listenRetry(refusals int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, maxListenRetry)
	}
	return min(time.Second<<min(refusals, 5), maxListenRetry)
}

func (b *bridge) stopListening() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopGET != nil {
		b.stopGET()
		b.stopGET = nil
	}
}

// die ends the bridge with err (said on stderr by run).
func (b *bridge) die(err error) {
	select {
	case b.fatal <- err:
	default:
	}
}

func metaProtocolVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v)
	return v
}
