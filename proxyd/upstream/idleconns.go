package upstream

import "net/http"

// idleCloser is the outermost layer of a server's HTTP client: it lets
// http.Client.CloseIdleConnections reach the pool at the bottom of the
// chain, whatever layers sit between.
type idleCloser struct {
	http.RoundTripper
	base *http.Transport
}

func (t idleCloser) CloseIdleConnections() { t.base.CloseIdleConnections() }

// useHTTP makes hc the server's HTTP client and lets the previous one's
// pooled connections go: a connection replaced by reconnecting or by a
// config change otherwise keeps them open until their idle timeout.
func (c *Conn) useHTTP(hc *http.Client) {
	c.mu.Lock()
	old := c.hc
	c.hc = hc
	c.mu.Unlock()
	if old != nil && old != hc {
		old.CloseIdleConnections()
	}
}

// closeHTTP lets the server's pooled connections go, once it is removed.
func (c *Conn) closeHTTP() { c.useHTTP(nil) }
