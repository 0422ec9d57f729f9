package discovery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/mcpx-dev/mcpx/internal/httppolicy"
	"github.com/mcpx-dev/mcpx/internal/redact"
)

// ErrRedirectRefused is wrapped by redirects the OAuth client will not
// follow.
var ErrRedirectRefused = httppolicy.ErrRedirectRefused

// NewHTTPClient returns the client for OAuth traffic: redirects follow
// httppolicy.Redirect (reads may change origin, a POST never does) and
// every hop's target must also be a URL OAuth may fetch (checkFetchURL:
// https, or http on loopback). When base is nil a transport is built
// whose dialer also refuses link-local addresses a hostname resolves to.
func NewHTTPClient(base http.RoundTripper, timeout time.Duration) *http.Client {
	if base == nil {
		base = transport(nil)
	}
	return &http.Client{Transport: base, Timeout: timeout, CheckRedirect: CheckRedirect}
}

// NewHTTPClientTrusting is NewHTTPClient trusting roots instead of the
// system store (a server's tls.ca_file): the whole sign-in of a server
// behind a private CA uses it.
func NewHTTPClientTrusting(roots *x509.CertPool, timeout time.Duration) *http.Client {
	return &http.Client{Transport: transport(roots), Timeout: timeout, CheckRedirect: CheckRedirect}
}

func transport(roots *x509.CertPool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: refuseLinkLocal}
	t.DialContext = d.DialContext
	if roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return t
}

// CheckRedirect is the redirect policy of NewHTTPClient, usable on any
// http.Client.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if err := (httppolicy.Redirect{CrossOriginReads: true}).Check(req, via); err != nil {
		return err
	}
	if err := checkFetchURL(req.URL); err != nil {
		return fmt.Errorf("%w: to %s: %w", ErrRedirectRefused, redact.URL(req.URL.String()), err)
	}
	return nil
}

func refuseLinkLocal(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if httppolicy.IsLinkLocalHost(host) {
		return fmt.Errorf("%w: link-local address %s", ErrURLRefused, host)
	}
	return nil
}

// detach keeps values, drops cancellation: a shared fetch must not die
// with the first caller who gives up.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
