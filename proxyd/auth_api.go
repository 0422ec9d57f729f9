package proxyd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
)

// loginTimeout bounds a sign-in when the request sets none: the user has
// this long to finish in the browser.
const loginTimeout = 5 * time.Minute

// httpServer returns the configured server a sign-in applies to.
func (d *Daemon) httpServer(name string) (config.Server, error) {
	s, ok := d.config().Server(name)
	if !ok {
		return config.Server{}, d.noServer(name)
	}
	if s.URL == "" {
		return config.Server{}, badRequest("server %q is a stdio server: it has no OAuth sign-in", name)
	}
	return *s, nil
}

// handleLogin signs in to a server: discovery, registration when needed,
// the authorization URL sent to the CLI to open, the callback received by
// proxyd's loopback listener, the code exchange, and the grant stored; for
// a machine grant (client credentials, workload identity, enterprise
// identity) the grant's token request instead of the browser.
func (d *Daemon) handleLogin(w http.ResponseWriter, r *http.Request) error {
	var req api.LoginRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	timeout, err := requestTimeout(req.TimeoutMS)
	if err != nil {
		return err
	}
	if timeout == 0 {
		timeout = loginTimeout
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	key := serverKey(s)
	// A sign-in reads the metadata afresh: the resource may have moved to
	// another authorization server, whose issuer then keys new
	// credentials (SEP-2352).
	if _, disc, err := d.oauthFor(s); err == nil {
		disc.Invalidate(s.URL)
	}
	res, err := d.discover(ctx, s)
	if err != nil {
		// A server that answers 401 without OAuth metadata often takes a
		// static token instead: say where that goes.
		return conflict("sign-in to %s: OAuth discovery failed: %v (run 'mcpx probe %s' for every URL tried; if %s takes a static token (PAT, API key) rather than OAuth, store it with 'mcpx auth set-token %s')",
			s.Name, redact.Text(err.Error()), s.Name, s.Name, s.Name)
	}
	var out *ndjson
	lr := oauth.LoginRequest{
		Key: key, Server: s.Name, Discovery: res, Configured: configuredClient(s),
		ClientName: "mcpx", HTTPClient: d.oauthClient(s),
		OpenURL: func(u string) error {
			out.send(api.LoginEvent{Type: api.LoginEventAuthorize, Time: time.Now().UTC(), URL: u})
			return nil
		},
	}
	if s.OAuth != nil {
		lr.ClientMetadataURL = s.OAuth.ClientMetadataURL
		lr.AllowMissingPKCEMethods = s.OAuth.AllowMissingPKCEMethods
		lr.DPoP = s.OAuth.DPoP
		if len(s.OAuth.Scopes) > 0 {
			lr.Scopes = s.OAuth.Scopes
		}
	}
	machine := d.machineGrant(s)
	pending, stepUp, err := d.auth.coord.PendingStepUp(ctx, key)
	if err != nil {
		// Scope step-up gave up: say so instead of looping.
		return &apiError{http.StatusConflict, api.CodeConflict, fmt.Sprintf("sign-in to %s: %v", s.Name, err)}
	}
	if stepUp {
		lr.Scopes = pending
		if machine != nil {
			machine.Scopes = pending
		}
	}
	out = newNDJSON(w)
	var result *oauth.LoginResult
	if machine != nil {
		// No browser: the grant itself signs in.
		result, err = d.auth.coord.LoginMachine(ctx, oauth.MachineLoginRequest{Key: key, Server: s.Name, Discovery: res,
			Client: configuredClient(s), Grant: machine, DPoP: s.OAuth.DPoP, HTTPClient: d.oauthClient(s)})
	} else {
		result, err = d.auth.coord.Login(ctx, lr)
	}
	if err != nil {
		d.log.Warn("sign-in failed", "server", s.Name, "err", redact.Text(err.Error()))
		out.send(api.LoginEvent{Type: api.LoginEventError, Time: time.Now().UTC(),
			Error: &api.ErrorDetail{Code: api.CodeBadRequest, Message: redact.Text(err.Error())}})
		return nil
	}
	d.auth.setSignedIn(key, true)
	d.log.Info("signed in", "server", s.Name, "client_source", result.ClientSource, "refresh_token", result.RefreshToken, "scopes", result.Scopes)
	out.send(api.LoginEvent{Type: api.LoginEventResult, Time: time.Now().UTC(), Result: &api.LoginResult{
		Server: s.Name, Scopes: nonNil(result.Scopes), Expiry: result.Expiry, RefreshToken: result.RefreshToken,
		ClientID: result.ClientID, ClientSource: result.ClientSource, NewRegistration: result.NewRegistration,
		Warnings: nonNil(result.Warnings), Connection: d.reconnectSignedIn(ctx, s.Name),
	}})
	return nil
}

// reconnectSignedIn connects the server again, now with its token, and
// waits until it is ready with its tools listed or has failed, so that a
// command run after `mcpx login` finds the server usable (or the login
// said why not).
func (d *Daemon) reconnectSignedIn(ctx context.Context, server string) *api.LoginConnection {
	c, ok := d.mgr.Get(server)
	if !ok {
		return nil
	}
	st, err := c.ReconnectWait(ctx)
	lc := &api.LoginConnection{State: st.State, Tools: st.Tools}
	switch {
	case err != nil:
		lc.Error = fmt.Sprintf("still connecting when the sign-in timed out: %v", err)
	case st.State == api.StateError:
		lc.Error = redact.Text(st.LastError)
	}
	return lc
}

// handleLogout removes the server's tokens and asks the authorization
// server to revoke the grant (RFC 7009) where it can.
func (d *Daemon) handleLogout(w http.ResponseWriter, r *http.Request) error {
	var req api.LogoutRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	key := serverKey(s)
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	out := api.LogoutResult{Server: s.Name}
	tok, terr := d.auth.store.Token(ctx, key)
	if terr == nil {
		out.Revoked, out.RevokeError = d.revoke(ctx, s, key, tok)
	}
	if err := d.auth.coord.Logout(ctx, key); err != nil {
		return err
	}
	out.Removed = terr == nil
	d.auth.setSignedIn(key, false)
	if c, ok := d.mgr.Get(s.Name); ok {
		c.Reconnect()
	}
	return writeJSON(w, out)
}

// revoke sends RFC 7009 revocation of the refresh token (which ends the
// grant), else the access token, when the server advertises an endpoint.
func (d *Daemon) revoke(ctx context.Context, s config.Server, key string, tok *oauth.Token) (bool, string) {
	res, err := d.discover(ctx, s)
	if err != nil || res.Metadata == nil || res.Metadata.RevocationEndpoint == "" {
		return false, "the authorization server advertises no revocation endpoint; tokens removed locally only"
	}
	client := configuredClient(s)
	if client == nil {
		if c, err := d.auth.store.Client(ctx, key); err == nil {
			client = c
		}
	}
	token, hint := tok.RefreshToken, "refresh_token"
	if token == "" {
		token, hint = tok.AccessToken, "access_token"
	}
	if err := oauth.Revoke(ctx, d.oauthClient(s), res.Metadata.RevocationEndpoint, client, token, hint); err != nil {
		return false, redact.Text(err.Error(), token)
	}
	return true, ""
}

func (d *Daemon) handleAuthStatus(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	out := []api.AuthStatus{}
	for _, s := range d.config().Servers {
		if s.URL == "" || (want != "" && s.Name != want) {
			continue
		}
		as := d.auth.coord.Status(serverKey(s))
		as.Server, as.URL = s.Name, redact.URL(s.URL)
		out = append(out, as)
	}
	if want != "" && len(out) == 0 {
		if _, err := d.httpServer(want); err != nil {
			return err
		}
	}
	return writeJSON(w, out)
}
