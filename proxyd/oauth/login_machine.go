package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
)

// MachineLoginRequest is `mcpx login SERVER` for a grant that needs no
// browser.
type MachineLoginRequest struct {
	Key, Server string
	Discovery   *discovery.Result
	Client      *Client // the configured client; nil for an anonymous workload
	Grant       *MachineGrant
	DPoP        bool
	HTTPClient  *http.Client
}

// LoginMachine obtains the first token of a machine grant and stores it;
// the coordinator obtains the next ones the same way at expiry.
func (c *Coordinator) LoginMachine(ctx context.Context, req MachineLoginRequest) (*LoginResult, error) {
	d := req.Discovery
	if d == nil || d.Metadata == nil || req.Grant == nil {
		return nil, errors.New("login: discovery result and grant required")
	}
	if d.ResourceMismatch {
		return nil, fmt.Errorf("login to %s: %w (%s)", req.Server, ErrResourceMismatch, strings.Join(d.Warnings, "; "))
	}
	md := d.Metadata
	if md.TokenEndpoint == "" {
		return nil, fmt.Errorf("login to %s: the authorization server advertises no token endpoint; set oauth.token_endpoint", req.Server)
	}
	res := &LoginResult{Warnings: slices.Clone(d.Warnings), ClientSource: "configured"}
	client := req.Client
	if client == nil {
		client = &Client{}
	}
	resolved, err := client.resolve()
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	fitAuthMethod(resolved, md)
	res.ClientID = resolved.ClientID
	grant := *req.Grant
	if len(grant.Scopes) == 0 {
		// A machine grant obtains a new token at expiry: it has no use
		// for offline_access, which such clients are usually refused.
		grant.Scopes = slices.DeleteFunc(slices.Clone(d.Scopes), func(s string) bool { return s == "offline_access" })
	}
	key, err := c.grantKey(req.DPoP, md, res)
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", req.Server, err)
	}
	tr := tokenRequest{Endpoint: md.TokenEndpoint, Issuer: md.Issuer, Client: resolved, Resource: d.ResourceIndicator,
		DPoPKey: key, HTTP: req.HTTPClient, Now: c.opts.Now}
	ot, err := grant.obtain(ctx, tr)
	if err != nil {
		var idp *IdPError
		if errors.As(err, &idp) {
			return nil, fmt.Errorf("login to %s: %s", req.Server, idp.Error())
		}
		e := ClassifyRefreshError(err, false)
		msg := redact.Text(e.Msg, tr.secrets()...)
		if e.Class == OutcomeInvalidClient {
			msg = "the authorization server rejected the configured client (invalid_client): check oauth.client_id and its client_secret or private_key"
			if e.HTTPStatus != 0 {
				msg += fmt.Sprintf(" [HTTP %d]", e.HTTPStatus)
			}
		}
		e = &RefreshError{Class: e.Class, Terminal: e.Terminal, Code: e.Code, HTTPStatus: e.HTTPStatus, RetryAfter: e.RetryAfter, Msg: msg, Err: e.Err}
		return nil, fmt.Errorf("login to %s: %w", req.Server, e)
	}
	tok := tokenFrom(ot, grant.Scopes, tr.now())
	bind(tok, key, md.Issuer, res)
	gen, err := c.SaveLogin(ctx, req.Key, req.Server, tok)
	if err != nil {
		return nil, err
	}
	res.Generation, res.Scopes, res.Expiry, res.RefreshToken = gen, tok.Scopes, tok.Expiry, tok.RefreshToken != ""
	return res, nil
}
