package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// clientVersion is what the probe announces as its MCP client version.
const clientVersion = "probe"

// buildClient returns the probe's HTTP client. Its first connection is the
// one the tcp and tls steps established, so the probe does not connect
// twice.
func (r *runner) buildClient() {
	var handed atomic.Bool
	targetAddr := r.hostPort()
	takeConn := func(scheme, addr string) net.Conn {
		if scheme != r.target.Scheme || addr != targetAddr {
			return nil
		}
		if r.conn != nil && handed.CompareAndSwap(false, true) {
			c := r.conn
			r.conn = nil
			return c
		}
		return nil
	}
	dialer := &net.Dialer{Timeout: r.opts.Timeout}
	tr := &http.Transport{
		Proxy:                 nil, // the probe measures the direct path
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   r.opts.Timeout,
		ResponseHeaderTimeout: r.opts.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if c := takeConn("http", addr); c != nil {
				return c, nil
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	// An http:// target may still point discovery at https URLs: they get
	// the same trust store and CA file, loaded on first use.
	var (
		poolOnce sync.Once
		lazy     *tls.Config
	)
	tlsConfig := func() *tls.Config {
		if r.tlsConfig != nil {
			return r.tlsConfig.Clone()
		}
		poolOnce.Do(func() {
			lazy = &tls.Config{NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
			if pool, err := rootPool(r.opts.CAFile); err == nil {
				lazy.RootCAs = pool
			}
		})
		return lazy.Clone()
	}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c := takeConn("https", addr); c != nil {
			return c, nil
		}
		cfg := tlsConfig()
		if h, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = h
		}
		d := &tls.Dialer{NetDialer: dialer, Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
	r.rec = &recorder{base: tr}
	r.client = &http.Client{Transport: r.rec, CheckRedirect: r.rec.checkRedirect}
}

// requestHeaders are the configured headers plus the stored token.
func (r *runner) requestHeaders() map[string]string {
	h := make(map[string]string, len(r.opts.Headers)+1)
	hasAuth := false
	for k, v := range r.opts.Headers {
		h[k] = v
		if strings.EqualFold(k, "Authorization") {
			hasAuth = true
		}
	}
	if r.opts.BearerToken != "" && !hasAuth {
		h["Authorization"] = "Bearer " + r.opts.BearerToken
	}
	return h
}

func (r *runner) newMCPClient() (*client.Client, error) {
	headers := r.requestHeaders()
	var tr transport.Interface
	var err error
	switch r.opts.Transport {
	case TransportSSE:
		tr, err = transport.NewSSE(r.target.String(), transport.WithHTTPClient(r.client), transport.WithHeaders(headers),
			transport.WithResponseTimeout(r.opts.Timeout), transport.WithEndpointTimeout(r.opts.Timeout))
	default:
		tr, err = transport.NewStreamableHTTP(r.target.String(), transport.WithHTTPBasicClient(r.client), transport.WithHTTPHeaders(headers))
	}
	if err != nil {
		return nil, fmt.Errorf("create %s transport: %w", r.opts.Transport, err)
	}
	opts := []client.ClientOption{client.WithDiscoverTimeout(r.opts.Timeout)}
	if r.opts.Protocol == ProtocolLegacy {
		opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	return client.NewClient(tr, opts...), nil
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// sanitizeURL drops userinfo and fragment for URLs handed to discovery.
func sanitizeURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment = ""
	return c.String()
}
