package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Steps of the discovery chain, as reported in *Error.
const (
	StepOverrides          = "overrides"
	StepServerURL          = "server_url"
	StepResourceMetadata   = "resource_metadata"
	StepResource           = "resource"
	StepAuthServer         = "authorization_server"
	StepAuthServerMetadata = "auth_server_metadata"
	StepEndpoints          = "endpoints"
)

// Sentinel causes wrapped in *Error.Err.
var (
	ErrNoAuthorizationServers = errors.New("protected resource metadata lists no authorization_servers")
	ErrResourceMismatch       = errors.New("protected resource metadata names a different resource")
	ErrIssuerMismatch         = errors.New("authorization server metadata issuer does not match")
	ErrMissingEndpoint        = errors.New("authorization server metadata lacks a required endpoint")
	ErrHTTPStatus             = errors.New("unexpected HTTP status")
)

// Error is a broken link of the discovery chain.
type Error struct {
	Step     string
	URL      string
	Status   int
	Err      error
	Attempts []Attempt
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("oauth discovery: ")
	b.WriteString(e.Step)
	if e.URL != "" {
		b.WriteString(": ")
		b.WriteString(e.URL)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Attempt is one URL discovery tried and what it answered.
type Attempt struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Used   bool   `json:"used"`
	// Start and End time the fetch, for the probe's timeline.
	Start, End time.Time `json:"-"`
}

// Result is the outcome of a discovery.
type Result struct {
	ResourceMetadataURL   string
	Resource              *ProtectedResource
	AuthServerURL         string
	AuthServerMetadataURL string
	Metadata              *ServerMetadata // with overrides applied
	Attempts              []Attempt
	Overridden            []string // config fields that replaced discovered values
	Warnings              []string
	Scopes                []string // scopes to request

	// ResourceIndicator is the RFC 8707 resource to send in authorization
	// and token requests.
	ResourceIndicator string
	// ResourceMismatch is set when the protected-resource metadata names a
	// resource that does not cover the server URL (RFC 9728 §3.3). Login
	// must refuse; the probe warns.
	ResourceMismatch bool
	// Cached is set when the documents came from the discovery cache.
	Cached bool
}

// DiscoverServer is discovery as mcpx runs it for a server, in proxyd's
// sign-in and in the probe alike: Discover, and when that finds no
// protected-resource metadata at all while neither overrides nor the
// challenge name any, the 2025-03-26 discovery (discoverLegacy) rather
// than a failure.
func (d *Discoverer) DiscoverServer(ctx context.Context, serverURL string, ch *Challenge, ov Overrides, configuredScopes []string) (*Result, error) {
	res, err := d.Discover(ctx, serverURL, ch, ov, configuredScopes)
	if err != nil && ov.empty() && (ch == nil || ch.ResourceMetadata == "") && legacyApplies(err) {
		return d.discoverLegacy(ctx, serverURL, ch, configuredScopes)
	}
	return res, err
}

func (d *Discoverer) result(dc *docs, ch *Challenge, configured []string, cached bool) *Result {
	r := &Result{
		ResourceMetadataURL:   dc.ResourceMetadataURL,
		Resource:              dc.Resource,
		AuthServerURL:         dc.AuthServerURL,
		AuthServerMetadataURL: dc.AuthServerMetadataURL,
		Metadata:              dc.Metadata,
		Attempts:              slices.Clone(dc.Attempts),
		Overridden:            slices.Clone(dc.Overridden),
		Warnings:              slices.Clone(dc.Warnings),
		ResourceIndicator:     dc.ResourceIndicator,
		ResourceMismatch:      dc.ResourceMismatch,
		Cached:                cached,
	}
	r.Scopes = SelectScopes(configured, ch, dc.Resource, dc.Metadata)
	return r
}

// SelectScopes applies the scope rule: configured scopes as they are; else
// the challenge's scope; else the resource's scopes_supported, plus
// offline_access when the authorization server lists it; else none.
func SelectScopes(configured []string, ch *Challenge, pr *ProtectedResource, md *ServerMetadata) []string {
	if len(configured) > 0 {
		return slices.Clone(configured)
	}
	if ch != nil && strings.TrimSpace(ch.Scope) != "" {
		return strings.Fields(ch.Scope)
	}
	if pr == nil || len(pr.ScopesSupported) == 0 {
		return nil
	}
	out := slices.Clone(pr.ScopesSupported)
	if md != nil && slices.Contains(md.ScopesSupported, "offline_access") && !slices.Contains(out, "offline_access") {
		out = append(out, "offline_access")
	}
	return out
}
