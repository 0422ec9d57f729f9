package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mcpx-dev/mcpx/internal/certpool"
	"github.com/mcpx-dev/mcpx/internal/httppolicy"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Wrapper adds a layer to a server's HTTP transport chain. Wrappers listed
// first end up outermost, so the call recorder goes first.
type Wrapper func(server string, next http.RoundTripper) http.RoundTripper

// newHTTPClient builds the http.Client that mcp-go uses for one server:
// wrappers (recorder, bearer) → event-stream bounds → response size limit
// → net/http with the server's TLS settings. mcp-go gets a plain client and never sees tokens.
//
// standing: the client carries a standing GET stream beside the calls
// (legacy era). It then speaks HTTP/1.1 only, a connection per stream: the
// settle before a call's result (standing.go) counts what the stream's own
// connection received, which HTTP/2's one shared connection cannot tell.
func newHTTPClient(s config.Server, wrappers []Wrapper, streams streamBounds, standing bool) (*http.Client, error) {
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           countingDialer(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // bursts of concurrent calls reuse connections instead of dialing
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// An answer is read through this buffer: with net/http's 4 KiB a
		// 64 KiB answer took about six reads (system calls) more.
		ReadBufferSize: 32 << 10,
		// A request goes out through this one, headers and body together
		// while they fit: with 4 KiB a larger body's rest went through a
		// buffer io.Copy allocates per request (up to 32 KiB, cleared),
		// in one or more writes of its own (TestRelayedCallIsOneWrite).
		// A connection holds both buffers while it is open.
		WriteBufferSize: 64 << 10,
	}
	if standing {
		base.ForceAttemptHTTP2 = false
		base.Protocols = new(http.Protocols)
		base.Protocols.SetHTTP1(true)
	}
	if s.TLS != nil && s.TLS.CAFile != "" {
		pool, err := certPool(s.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = standardHeaders{next: limitTransport{next: retryAfterTransport{next: base}, max: s.ResponseLimit()}}
	rt = boundedStreams{next: rt, b: streams}
	for i := len(wrappers) - 1; i >= 0; i-- {
		rt = wrappers[i](s.Name, rt)
	}
	return &http.Client{Transport: idleCloser{RoundTripper: rt, base: base}, CheckRedirect: httppolicy.Redirect{}.Check}, nil
}

// certPool is the system pool plus the configured CA file.
func certPool(file string) (*x509.CertPool, error) {
	pool, err := certpool.Load(file)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	return pool, nil
}
