// Package httppolicy says where mcpx's HTTP requests may go: the one
// redirect policy of every client (upstream calls, OAuth, the probe) and
// the host checks it rests on.
package httppolicy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// ErrRedirectRefused is wrapped by every refused redirect.
var ErrRedirectRefused = errors.New("redirect refused")

// MaxRedirects is how many hops a request may take.
const MaxRedirects = 5

// Redirect is the redirect policy. A hop is refused when it would take a
// request somewhere weaker or foreign:
//   - after MaxRedirects hops;
//   - to a URL with userinfo, or to a link-local address;
//   - from https to http, unless the target is loopback;
//   - to another origin (scheme, host, port), unless CrossOriginReads is
//     set and the hop is a GET or HEAD following one.
//
// Credentials are added below net/http's own header stripping (the bearer
// transport, configured headers), so a hop to another origin would carry
// them: only clients that add none to reads set CrossOriginReads.
type Redirect struct {
	// CrossOriginReads lets GET and HEAD requests change origin (OAuth
	// metadata documents); a POST, whose body holds the grant, never does.
	CrossOriginReads bool
}

// Check is usable as http.Client.CheckRedirect. Its errors wrap
// ErrRedirectRefused.
func (p Redirect) Check(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirectRefused, MaxRedirects)
	}
	prev := via[len(via)-1]
	to := req.URL
	switch {
	case to.User != nil:
		return fmt.Errorf("%w: the target %s carries user information", ErrRedirectRefused, redact.URL(to.String()))
	case IsLinkLocalHost(to.Hostname()):
		return fmt.Errorf("%w: the target %s is a link-local address", ErrRedirectRefused, redact.URL(to.String()))
	case strings.EqualFold(prev.URL.Scheme, "https") && !strings.EqualFold(to.Scheme, "https") && !IsLoopbackHost(to.Hostname()):
		return fmt.Errorf("%w: from https to http (%s)", ErrRedirectRefused, redact.URL(to.String()))
	case !sameOrigin(prev.URL, to) && !(p.CrossOriginReads && isRead(prev.Method) && isRead(req.Method)):
		return fmt.Errorf("%w: to another origin (%s to %s): credentials stay with the configured server",
			ErrRedirectRefused, origin(prev.URL), origin(to))
	}
	return nil
}

func isRead(method string) bool {
	return method == "" || method == http.MethodGet || method == http.MethodHead
}

// origin is scheme://host[:port] of u, for messages.
func origin(u *url.URL) string { return strings.ToLower(u.Scheme) + "://" + u.Host }

// sameOrigin compares scheme, host and effective port (an explicit
// default port is the same origin).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// IsLoopbackHost reports whether host (without port) names the local
// machine: "localhost", a name under .localhost, or a loopback IP literal.
func IsLoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// IsLinkLocalHost reports whether host is a link-local IP literal (cloud
// metadata services live there).
func IsLinkLocalHost(host string) bool {
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast())
}
