package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// StepLegacy names the 2025-03-26 discovery in *Error.
const StepLegacy = "legacy_discovery"

// legacyApplies reports whether err, from Discover without a
// resource_metadata hint and without overrides, says only that the server
// serves no protected-resource metadata (every well-known URL answered
// 404): the shape of a server written to the 2025-03-26 MCP spec, which
// predates RFC 9728.
func legacyApplies(err error) bool {
	var de *Error
	if !errors.As(err, &de) || de.Step != StepResourceMetadata || len(de.Attempts) == 0 {
		return false
	}
	for _, a := range de.Attempts {
		if a.Status != http.StatusNotFound {
			return false
		}
	}
	return true
}

// discoverLegacy runs the 2025-03-26 discovery: the authorization base URL
// is the server URL without its path; its RFC 8414 metadata is used when
// served, else the spec's default endpoints /authorize, /token and
// /register of that base. Callers use it only when legacyApplies to the
// error of Discover: a server that names its metadata never gets guessed
// endpoints. Results are cached like Discover's.
func (d *Discoverer) discoverLegacy(ctx context.Context, serverURL string, ch *Challenge, configuredScopes []string) (*Result, error) {
	su, err := url.Parse(serverURL)
	if err != nil || !su.IsAbs() || su.Host == "" || (su.Scheme != "https" && su.Scheme != "http") {
		if err == nil {
			err = errors.New("not an absolute http(s) URL")
		}
		return nil, &Error{Step: StepServerURL, Err: err}
	}
	key := "legacy\x00" + serverURL
	if e := d.lookup(key, ""); e != nil {
		if e.err != nil {
			return nil, e.err
		}
		return d.result(e.docs, ch, configuredScopes, true), nil
	}
	d.mu.Lock()
	epoch := d.epochs[serverURL]
	d.mu.Unlock()
	return d.shared(ctx, fmt.Sprintf("%s\x00%d", key, epoch), key, su, serverURL, epoch, "", ch, configuredScopes,
		func(fctx context.Context) (*docs, error) { return d.fetchLegacy(fctx, su) })
}

func (f *fetcher) fetchLegacy(ctx context.Context, su *url.URL) (*docs, error) {
	base := su.Scheme + "://" + su.Host
	canServer, _ := canonicalResource(su.String())
	dc := &docs{
		AuthServerURL:     base,
		ResourceIndicator: canServer,
		Warnings:          []string{"the server serves no protected resource metadata (RFC 9728): using 2025-03-26 discovery from " + base},
	}
	mdURL := base + "/.well-known/oauth-authorization-server"
	var md *ServerMetadata
	att, err := f.getJSON(ctx, mdURL, func(b []byte) error {
		var perr error
		md, perr = ParseServerMetadata(b)
		return perr
	})
	switch {
	case err == nil:
		att.Used = true
		dc.AuthServerMetadataURL = mdURL
		if strings.TrimSuffix(md.Issuer, "/") != base {
			dc.Warnings = append(dc.Warnings, fmt.Sprintf("metadata issuer %q differs from the authorization base URL %s", md.Issuer, base))
		}
	case att.Status == http.StatusNotFound:
		// The 2025-03-26 spec's fallback for servers without metadata; it
		// also makes PKCE S256 mandatory for every server.
		md = &ServerMetadata{
			Issuer:                        base,
			AuthorizationEndpoint:         base + "/authorize",
			TokenEndpoint:                 base + "/token",
			RegistrationEndpoint:          base + "/register",
			CodeChallengeMethodsSupported: []string{"S256"},
		}
		dc.Warnings = append(dc.Warnings, "no authorization server metadata at "+mdURL+": using the default endpoints /authorize, /token and /register")
	default:
		dc.Attempts = append(dc.Attempts, att)
		return nil, &Error{Step: StepLegacy, URL: mdURL, Status: att.Status, Err: err, Attempts: dc.Attempts}
	}
	dc.Attempts = append(dc.Attempts, att)
	for _, f := range []struct{ name, v string }{
		{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint},
	} {
		if f.v == "" {
			return nil, &Error{Step: StepEndpoints, URL: mdURL, Err: fmt.Errorf("%w: no %s; set oauth.%s", ErrMissingEndpoint, f.name, f.name), Attempts: dc.Attempts}
		}
		if _, err := parseFetchURL(f.v); err != nil {
			return nil, &Error{Step: StepEndpoints, URL: f.v, Err: fmt.Errorf("%s: %w", f.name, err), Attempts: dc.Attempts}
		}
	}
	for _, v := range []*string{&md.RegistrationEndpoint, &md.RevocationEndpoint} {
		if *v == "" {
			continue
		}
		if _, err := parseFetchURL(*v); err != nil {
			dc.Warnings = append(dc.Warnings, fmt.Sprintf("endpoint %s ignored: %v", redact.URL(*v), err))
			*v = ""
		}
	}
	dc.Metadata = md
	return dc, nil
}
