package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// Wrapper adds a layer to a server's HTTP transport chain. Wrappers listed
// first end up outermost, so the call recorder goes first.
type Wrapper func(server string, next http.RoundTripper) http.RoundTripper

// newHTTPClient builds the http.Client that mcp-go uses for one server:
// wrappers (recorder, bearer) → event-stream bounds → response size limit
// → net/http with the server's TLS settings. mcp-go gets a plain client and never sees tokens.
func newHTTPClient(s config.Server, wrappers []Wrapper, streams streamBounds) (*http.Client, error) {
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256, // bursts of concurrent calls reuse connections instead of dialing
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if s.TLS != nil && s.TLS.CAFile != "" {
		pool, err := certPool(s.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = limitTransport{next: retryAfterTransport{next: base}, max: s.ResponseLimit()}
	rt = boundedStreams{next: rt, b: streams}
	for i := len(wrappers) - 1; i >= 0; i-- {
		rt = wrappers[i](s.Name, rt)
	}
	return &http.Client{Transport: rt, CheckRedirect: redirectPolicy}, nil
}

// certPool is the system pool plus the configured CA file.
func certPool(file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading tls.ca_file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls.ca_file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// redirectPolicy refuses redirects that would leak a request to a weaker or
// foreign place: https→http off loopback, and any hop to another origin.
// The bearer is added inside the transport, below the client's own
// header stripping, so a cross-origin hop would carry the user's token.
func redirectPolicy(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	prev := via[len(via)-1]
	if prev.URL.Scheme == "https" && req.URL.Scheme == "http" && !isLoopbackHost(req.URL.Hostname()) {
		return fmt.Errorf("refused redirect from https to http (%s)", req.URL.Redacted())
	}
	if origin(req.URL) != origin(via[0].URL) {
		return fmt.Errorf("refused redirect to another origin (%s): credentials stay with the configured server", req.URL.Redacted())
	}
	return nil
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
