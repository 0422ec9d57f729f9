package discovery

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/httppolicy"
)

// ErrURLRefused marks a URL that mcpx will not fetch or hand out: not
// https (or http on loopback), link-local, or carrying userinfo.
var ErrURLRefused = errors.New("url refused")

// checkFetchURL reports whether u may be fetched or used as an OAuth
// endpoint: https, or http on a loopback host; no userinfo; never a
// link-local address.
func checkFetchURL(u *url.URL) error {
	if u == nil {
		return fmt.Errorf("%w: empty", ErrURLRefused)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !httppolicy.IsLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%w: http is allowed only on loopback, got host %q", ErrURLRefused, u.Hostname())
		}
	default:
		return fmt.Errorf("%w: scheme %q is not https", ErrURLRefused, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%w: no host", ErrURLRefused)
	}
	if u.User != nil {
		return fmt.Errorf("%w: userinfo in URL", ErrURLRefused)
	}
	if httppolicy.IsLinkLocalHost(u.Hostname()) {
		return fmt.Errorf("%w: link-local address %s", ErrURLRefused, u.Hostname())
	}
	return nil
}

func parseFetchURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrURLRefused, err)
	}
	if !u.IsAbs() {
		return nil, fmt.Errorf("%w: %q is not an absolute URL", ErrURLRefused, raw)
	}
	if err := checkFetchURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// ValidateEndpointURL checks a configured override: https or http on a
// loopback host; no query, fragment, userinfo or whitespace.
func ValidateEndpointURL(raw string) error {
	if raw == "" {
		return errors.New("empty URL")
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f' }) {
		return errors.New("URL contains whitespace")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	if !u.IsAbs() || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return errors.New("URL has a query")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return errors.New("URL has a fragment")
	}
	if err := checkFetchURL(u); err != nil {
		return err
	}
	return nil
}

// Overrides replace what discovery would otherwise learn from metadata.
type Overrides struct {
	AuthorizationEndpoint string
	TokenEndpoint         string
	RegistrationEndpoint  string
	AuthServerMetadataURL string
}

// OverrideError names the invalid override field (config key).
type OverrideError struct {
	Field string
	Err   error
}

func (e *OverrideError) Error() string { return fmt.Sprintf("oauth.%s: %v", e.Field, e.Err) }
func (e *OverrideError) Unwrap() error { return e.Err }

func (o Overrides) fields() []struct{ name, value string } {
	return []struct{ name, value string }{
		{"authorization_endpoint", o.AuthorizationEndpoint},
		{"token_endpoint", o.TokenEndpoint},
		{"registration_endpoint", o.RegistrationEndpoint},
		{"auth_server_metadata_url", o.AuthServerMetadataURL},
	}
}

// Validate checks every set field; errors are *OverrideError joined.
func (o Overrides) Validate() error {
	var errs []error
	for _, f := range o.fields() {
		if f.value == "" {
			continue
		}
		if err := ValidateEndpointURL(f.value); err != nil {
			errs = append(errs, &OverrideError{Field: f.name, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Sanitize drops invalid fields and returns the names it dropped, for a
// load-time warning that names the field but never its value.
func (o Overrides) Sanitize() (Overrides, []string) {
	var dropped []string
	check := func(name string, v *string) {
		if *v != "" && ValidateEndpointURL(*v) != nil {
			*v = ""
			dropped = append(dropped, name)
		}
	}
	check("authorization_endpoint", &o.AuthorizationEndpoint)
	check("token_endpoint", &o.TokenEndpoint)
	check("registration_endpoint", &o.RegistrationEndpoint)
	check("auth_server_metadata_url", &o.AuthServerMetadataURL)
	return o, dropped
}

func (o Overrides) empty() bool { return o == Overrides{} }

// canonicalResource lower-cases scheme and host, drops a default port, the
// fragment and a trailing slash, per the MCP spec's canonical server URI.
func canonicalResource(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	if !u.IsAbs() || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.Fragment = ""
	u.RawFragment = ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// resourceMatches reports whether the protected-resource identifier covers
// the server URL: same origin, and the resource path equals the server
// path or is a segment prefix of it.
func resourceMatches(resource, server string) bool {
	r, err1 := canonicalResource(resource)
	s, err2 := canonicalResource(server)
	if err1 != nil || err2 != nil {
		return false
	}
	if r == s {
		return true
	}
	ru, _ := url.Parse(r)
	su, _ := url.Parse(s)
	if ru.Scheme != su.Scheme || ru.Host != su.Host || ru.RawQuery != "" {
		return false
	}
	return ru.Path == "" || strings.HasPrefix(su.Path, ru.Path+"/")
}
