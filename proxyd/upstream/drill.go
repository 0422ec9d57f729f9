package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// forgedSession makes the session layer present an id the server does not
// know in place of a live one (the session drill against servers that do
// not accept DELETE).
type forgedSession struct {
	real, fake string
}

// SessionEnd says how EndSession ended the session.
const (
	EndedByDelete  = "delete"
	EndedByUnknown = "unknown_session_id"
)

// EndSession makes the upstream session unusable, as a server restart
// would, for the session drill: an HTTP DELETE of the session when the
// server accepts it, otherwise proxyd presents a session id the server does
// not know until the session is re-established. It reports which.
func (c *Conn) EndSession(ctx context.Context) (string, error) {
	if ok, why := c.Sessionful(); !ok {
		return "", errors.New(why)
	}
	if err := c.waitBarrier(ctx); err != nil {
		return "", err
	}
	c.mu.RLock()
	sid, hc, version := c.sid, c.hc, c.version
	c.mu.RUnlock()
	if hc == nil {
		return "", errors.New("no HTTP client for this server")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.cfg.URL, nil)
	if err != nil {
		return "", fmt.Errorf("building DELETE: %w", err)
	}
	for k, v := range c.headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set(sessionHeader, sid)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("DELETE of the session: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		c.opts.logger().Info("upstream session ended by DELETE", "server", c.name, "session", prefix(sid))
		return EndedByDelete, nil
	case resp.StatusCode == http.StatusNotFound:
		// The server no longer knew the session: it is as good as ended.
		c.opts.logger().Info("upstream answered DELETE with 404: the session was already gone", "server", c.name, "session", prefix(sid))
		return EndedByDelete, nil
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	c.forged.Store(&forgedSession{real: sid, fake: "mcpx-unknown-" + hex.EncodeToString(b[:])})
	c.opts.logger().Info("upstream refused DELETE; presenting an unknown session id", "server", c.name,
		"session", prefix(sid), "status", resp.StatusCode)
	return EndedByUnknown, nil
}
