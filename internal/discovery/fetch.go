package discovery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// fetcher walks the discovery chain over HTTP, with no cache.
type fetcher struct {
	client         *http.Client
	strictResource bool
}

// docs is the cacheable part of a Result.
type docs struct {
	ResourceMetadataURL   string
	Resource              *ProtectedResource
	AuthServerURL         string
	AuthServerMetadataURL string
	Metadata              *ServerMetadata
	Attempts              []Attempt
	Overridden            []string
	Warnings              []string
	ResourceIndicator     string
	ResourceMismatch      bool
}

// fetch walks the chain with no cache.
func (f *fetcher) fetch(ctx context.Context, su *url.URL, hint string, ov Overrides) (*docs, error) {
	dc := &docs{}

	// The overridden metadata URL does not depend on the resource
	// metadata: fetch both at once.
	type mdResult struct {
		md  *ServerMetadata
		att Attempt
		err error
	}
	var ovMD chan mdResult
	if ov.AuthServerMetadataURL != "" {
		ovMD = make(chan mdResult, 1)
		go func() {
			var m *ServerMetadata
			att, err := f.getJSON(ctx, ov.AuthServerMetadataURL, func(b []byte) error {
				var perr error
				m, perr = ParseServerMetadata(b)
				return perr
			})
			ovMD <- mdResult{m, att, err}
		}()
	}

	prm, prmURL, prmAtts, prmErr := f.fetchPRM(ctx, su, hint)
	dc.Attempts = append(dc.Attempts, prmAtts...)

	var om mdResult
	if ovMD != nil {
		om = <-ovMD
		dc.Attempts = append(dc.Attempts, om.att)
	}
	canServer, _ := canonicalResource(su.String())
	synthOK := ov.AuthorizationEndpoint != "" && ov.TokenEndpoint != ""

	if prmErr != nil {
		if ovMD == nil && !synthOK {
			prmErr.Attempts = dc.Attempts
			return nil, prmErr
		}
		dc.Warnings = append(dc.Warnings, "protected resource metadata unavailable ("+prmErr.Error()+"); using configured overrides")
		dc.ResourceIndicator = canServer
	} else {
		dc.Resource = prm
		dc.ResourceMetadataURL = prmURL
		if !resourceMatches(prm.Resource, su.String()) {
			dc.ResourceMismatch = true
			msg := fmt.Sprintf("protected resource metadata names resource %q, which does not match the server URL %s", prm.Resource, redact.URL(su.String()))
			if f.strictResource {
				return nil, &Error{Step: StepResource, URL: prmURL, Err: fmt.Errorf("%w: %s", ErrResourceMismatch, msg), Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, msg)
			dc.ResourceIndicator = canServer
		} else {
			dc.ResourceIndicator = prm.Resource
		}
		if len(prm.AuthorizationServers) == 0 {
			if ovMD == nil && !synthOK {
				return nil, &Error{Step: StepAuthServer, URL: prmURL, Err: ErrNoAuthorizationServers, Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, ErrNoAuthorizationServers.Error()+"; using configured overrides")
		} else {
			as := prm.AuthorizationServers[0]
			if _, err := parseFetchURL(as); err != nil {
				return nil, &Error{Step: StepAuthServer, URL: as, Err: err, Attempts: dc.Attempts}
			}
			dc.AuthServerURL = as
			if len(prm.AuthorizationServers) > 1 {
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("%d authorization servers listed; using the first, %s", len(prm.AuthorizationServers), as))
			}
		}
	}

	// Authorization server metadata.
	var md *ServerMetadata
	switch {
	case ovMD != nil:
		if om.err != nil {
			if !synthOK {
				return nil, &Error{Step: StepAuthServerMetadata, URL: ov.AuthServerMetadataURL, Status: om.att.Status, Err: om.err, Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, "authorization server metadata unavailable; using the configured endpoints")
		} else {
			md = om.md
			dc.AuthServerMetadataURL = ov.AuthServerMetadataURL
			if dc.AuthServerURL != "" && md.Issuer != dc.AuthServerURL {
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("configured metadata issuer %q differs from the authorization server %q", md.Issuer, dc.AuthServerURL))
			}
		}
		dc.Overridden = append(dc.Overridden, "auth_server_metadata_url")
	case dc.AuthServerURL != "":
		m, mdURL, atts, err := f.fetchASMetadata(ctx, dc.AuthServerURL)
		dc.Attempts = append(dc.Attempts, atts...)
		switch {
		case err == nil:
			md = m
			dc.AuthServerMetadataURL = mdURL
			if md.Issuer != dc.AuthServerURL {
				if strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(dc.AuthServerURL, "/") {
					return nil, &Error{Step: StepAuthServerMetadata, URL: mdURL, Err: fmt.Errorf("%w: issuer %q, expected %q", ErrIssuerMismatch, md.Issuer, dc.AuthServerURL), Attempts: dc.Attempts}
				}
				dc.Warnings = append(dc.Warnings, fmt.Sprintf("issuer %q differs from %q by a trailing slash", md.Issuer, dc.AuthServerURL))
			}
		case synthOK:
			dc.Warnings = append(dc.Warnings, "authorization server metadata unavailable ("+err.Error()+"); using the configured endpoints")
		default:
			err.Attempts = dc.Attempts
			return nil, err
		}
	}
	if md == nil {
		// Only reachable with both endpoint overrides: the document is
		// built from them alone, never from guessed paths.
		md = &ServerMetadata{Issuer: dc.AuthServerURL}
	} else {
		cp := *md
		md = &cp
	}
	if ov.AuthorizationEndpoint != "" {
		md.AuthorizationEndpoint = ov.AuthorizationEndpoint
		dc.Overridden = append(dc.Overridden, "authorization_endpoint")
	}
	if ov.TokenEndpoint != "" {
		md.TokenEndpoint = ov.TokenEndpoint
		dc.Overridden = append(dc.Overridden, "token_endpoint")
	}
	if ov.RegistrationEndpoint != "" {
		md.RegistrationEndpoint = ov.RegistrationEndpoint
		dc.Overridden = append(dc.Overridden, "registration_endpoint")
	}
	for _, f := range []struct{ name, v string }{
		{"authorization_endpoint", md.AuthorizationEndpoint},
		{"token_endpoint", md.TokenEndpoint},
	} {
		if f.v == "" {
			return nil, &Error{Step: StepEndpoints, URL: dc.AuthServerMetadataURL, Err: fmt.Errorf("%w: no %s; set oauth.%s", ErrMissingEndpoint, f.name, f.name), Attempts: dc.Attempts}
		}
	}
	for _, f := range []struct {
		name string
		v    *string
		must bool
	}{
		{"authorization_endpoint", &md.AuthorizationEndpoint, true},
		{"token_endpoint", &md.TokenEndpoint, true},
		{"registration_endpoint", &md.RegistrationEndpoint, true},
		{"revocation_endpoint", &md.RevocationEndpoint, false},
	} {
		if *f.v == "" {
			continue
		}
		if _, err := parseFetchURL(*f.v); err != nil {
			if f.must {
				return nil, &Error{Step: StepEndpoints, URL: *f.v, Err: fmt.Errorf("%s: %w", f.name, err), Attempts: dc.Attempts}
			}
			dc.Warnings = append(dc.Warnings, fmt.Sprintf("%s ignored: %v", f.name, err))
			*f.v = ""
		}
	}
	dc.Metadata = md
	if md.LacksRefreshGrant() {
		dc.Warnings = append(dc.Warnings, "authorization server does not list refresh_token in grant_types_supported: users must sign in again at every expiry")
	}
	return dc, nil
}

// fetchPRM tries the challenge's resource_metadata URL, else the
// path-inserted well-known URL and then the root one.
func (f *fetcher) fetchPRM(ctx context.Context, su *url.URL, hint string) (*ProtectedResource, string, []Attempt, *Error) {
	var candidates []string
	if hint != "" {
		candidates = []string{hint}
	} else {
		origin := su.Scheme + "://" + su.Host
		if p := strings.TrimSuffix(su.EscapedPath(), "/"); p != "" {
			candidates = append(candidates, origin+"/.well-known/oauth-protected-resource"+p)
		}
		candidates = append(candidates, origin+"/.well-known/oauth-protected-resource")
	}
	var atts []Attempt
	var last *Error
	for _, c := range candidates {
		var pr *ProtectedResource
		att, err := f.getJSON(ctx, c, func(b []byte) error {
			var perr error
			pr, perr = ParseProtectedResource(b)
			return perr
		})
		if err == nil {
			att.Used = true
			atts = append(atts, att)
			return pr, c, atts, nil
		}
		atts = append(atts, att)
		last = pickError(last, &Error{Step: StepResourceMetadata, URL: att.URL, Status: att.Status, Err: err})
	}
	return nil, "", atts, last
}

// asMetadataURLs lists the metadata URLs of an issuer in the order the MCP
// spec prescribes (RFC 8414, then OpenID Connect, both insertion orders for
// an issuer with a path).
func asMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("parse issuer: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

func (f *fetcher) fetchASMetadata(ctx context.Context, issuer string) (*ServerMetadata, string, []Attempt, *Error) {
	cands, err := asMetadataURLs(issuer)
	if err != nil {
		return nil, "", nil, &Error{Step: StepAuthServerMetadata, URL: issuer, Err: err}
	}
	var atts []Attempt
	var last *Error
	for _, c := range cands {
		var m *ServerMetadata
		att, err := f.getJSON(ctx, c, func(b []byte) error {
			var perr error
			m, perr = ParseServerMetadata(b)
			return perr
		})
		if err == nil {
			att.Used = true
			atts = append(atts, att)
			return m, c, atts, nil
		}
		atts = append(atts, att)
		last = pickError(last, &Error{Step: StepAuthServerMetadata, URL: att.URL, Status: att.Status, Err: err})
	}
	return nil, "", atts, last
}

const maxDocument = 1 << 20

// getJSON fetches rawURL and hands the body of a 200 to decode.
func (f *fetcher) getJSON(ctx context.Context, rawURL string, decode func([]byte) error) (att Attempt, err error) {
	att = Attempt{URL: rawURL, Start: time.Now()}
	defer func() { att.End = time.Now() }()
	u, err := parseFetchURL(rawURL)
	if err != nil {
		att.Error = err.Error()
		return att, err
	}
	att.URL = redact.URL(u.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("fetch %s: %w", att.URL, err)
	}
	defer resp.Body.Close()
	att.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		att.Error = err.Error()
		return att, fmt.Errorf("read %s: %w", att.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("%w %d", ErrHTTPStatus, resp.StatusCode)
		att.Error = err.Error()
		return att, err
	}
	if len(body) > maxDocument {
		err := fmt.Errorf("%w: larger than %d bytes", ErrMalformedMetadata, maxDocument)
		att.Error = err.Error()
		return att, err
	}
	if err := decode(body); err != nil {
		att.Error = err.Error()
		return att, err
	}
	return att, nil
}

// pickError keeps the more telling of two candidate failures: a 404 only
// says "not here", anything else says what is wrong.
func pickError(prev, next *Error) *Error {
	if prev != nil && prev.Status != http.StatusNotFound && next.Status == http.StatusNotFound {
		return prev
	}
	return next
}
