package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRedirectRefused is wrapped by redirects the OAuth client will not
// follow.
var ErrRedirectRefused = errors.New("redirect refused")

const maxRedirects = 10

// NewHTTPClient returns the client for OAuth traffic. Every redirect hop is
// checked: the target must be https or http on loopback (so https→http to a
// non-loopback host is refused), never link-local, and a POST is never
// redirected to another origin. When base is nil a transport is built whose
// dialer also refuses link-local addresses a hostname resolves to.
func NewHTTPClient(base http.RoundTripper, timeout time.Duration) *http.Client {
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: refuseLinkLocal}
		t.DialContext = d.DialContext
		base = t
	}
	return &http.Client{Transport: base, Timeout: timeout, CheckRedirect: CheckRedirect}
}

// CheckRedirect is the redirect policy of NewHTTPClient, usable on any
// http.Client.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirectRefused, maxRedirects)
	}
	prev := via[len(via)-1]
	if err := CheckFetchURL(req.URL); err != nil {
		return fmt.Errorf("%w: to %s: %w", ErrRedirectRefused, redactURL(req.URL), err)
	}
	if prev.Method == http.MethodPost && !sameOrigin(prev.URL, req.URL) {
		return fmt.Errorf("%w: cross-origin redirect of a POST from %s to %s", ErrRedirectRefused, originOf(prev.URL), originOf(req.URL))
	}
	return nil
}

func refuseLinkLocal(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if isLinkLocalHost(host) {
		return fmt.Errorf("%w: link-local address %s", ErrURLRefused, host)
	}
	return nil
}

func originOf(u *url.URL) string { return strings.ToLower(u.Scheme) + "://" + u.Host }

// redactURL keeps scheme, host and path: queries may carry codes or tokens.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.Fragment = ""
	return c.String()
}

// detach keeps values, drops cancellation: a shared fetch must not die
// with the first caller who gives up.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
