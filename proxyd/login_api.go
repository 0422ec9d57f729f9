package proxyd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
)

// loginTimeout bounds a sign-in when the request sets none: the user has
// this long to finish in the browser.
const loginTimeout = 5 * time.Minute

func (d *Daemon) authRoutes(handle func(string, handler)) {
	handle("POST /v1/login", d.handleLogin)
	handle("POST /v1/logout", d.handleLogout)
	handle("GET /v1/auth/status", d.handleAuthStatus)
	handle("POST /v1/drill/refresh", d.handleDrillRefresh)
}

// httpServer returns the configured server a sign-in applies to.
func (d *Daemon) httpServer(name string) (config.Server, error) {
	s, ok := d.config().Server(name)
	if !ok {
		return config.Server{}, notFound("no server named %q (see 'mcpx servers')", name)
	}
	if s.URL == "" {
		return config.Server{}, badRequest("server %q is a stdio server: it has no OAuth sign-in", name)
	}
	return *s, nil
}

// ndjson writes a stream of events, one JSON object per line.
type ndjson struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func newNDJSON(w http.ResponseWriter) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	return &ndjson{w: w}
}

func (n *ndjson) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	_, _ = n.w.Write(append(b, '\n'))
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}

// handleLogin signs in to a server: discovery, registration when needed,
// the authorization URL sent to the CLI to open, the callback received by
// proxyd's loopback listener, the code exchange, and the grant stored.
func (d *Daemon) handleLogin(w http.ResponseWriter, r *http.Request) error {
	var req api.LoginRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	timeout := loginTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	key := serverKey(s)
	res, err := d.discover(ctx, s)
	if err != nil {
		return badRequest("sign-in to %s: OAuth discovery failed: %v (run 'mcpx probe %s' for every URL tried)", s.Name, redact.Text(err.Error()), s.Name)
	}
	var out *ndjson
	lr := oauth.LoginRequest{
		Key: key, Server: s.Name, Discovery: res, Configured: configuredClient(s),
		ClientName: "mcpx", HTTPClient: d.auth.hc,
		OpenURL: func(u string) error {
			out.send(api.LoginEvent{Type: api.LoginEventAuthorize, Time: time.Now().UTC(), URL: u})
			return nil
		},
	}
	if s.OAuth != nil {
		lr.ClientMetadataURL = s.OAuth.ClientMetadataURL
		lr.AllowMissingPKCEMethods = s.OAuth.AllowMissingPKCEMethods
		if len(s.OAuth.Scopes) > 0 {
			lr.Scopes = s.OAuth.Scopes
		}
	}
	pending, stepUp, err := d.auth.coord.PendingStepUp(ctx, key)
	if err != nil {
		// Scope step-up gave up: say so instead of looping.
		return &apiError{http.StatusConflict, api.CodeConflict, fmt.Sprintf("sign-in to %s: %v", s.Name, err)}
	}
	if stepUp {
		lr.Scopes = pending
	}
	out = newNDJSON(w)
	result, err := d.auth.coord.Login(ctx, lr)
	if err != nil {
		d.log.Warn("sign-in failed", "server", s.Name, "err", redact.Text(err.Error()))
		out.send(api.LoginEvent{Type: api.LoginEventError, Time: time.Now().UTC(),
			Error: &api.ErrorDetail{Code: api.CodeBadRequest, Message: redact.Text(err.Error())}})
		return nil
	}
	d.auth.setSignedIn(key, true)
	d.log.Info("signed in", "server", s.Name, "client_source", result.ClientSource, "refresh_token", result.RefreshToken, "scopes", result.Scopes)
	if c, ok := d.mgr.Get(s.Name); ok {
		c.Reconnect() // connect again, now with the token
	}
	out.send(api.LoginEvent{Type: api.LoginEventResult, Time: time.Now().UTC(), Result: &api.LoginResult{
		Server: s.Name, Scopes: nonNil(result.Scopes), Expiry: result.Expiry, RefreshToken: result.RefreshToken,
		ClientID: result.ClientID, ClientSource: result.ClientSource, NewRegistration: result.NewRegistration,
		Warnings: nonNil(result.Warnings),
	}})
	return nil
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
	if err := oauth.Revoke(ctx, d.auth.hc, res.Metadata.RevocationEndpoint, client, token, hint); err != nil {
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
		st := d.auth.coord.Status(serverKey(s))
		as := api.AuthStatus{
			Server: s.Name, URL: redact.URL(s.URL), SignedIn: st.SignedIn, RefreshToken: st.HasRefreshToken,
			Scopes: nonNil(st.Scopes), LastOutcome: string(st.LastOutcome), LastClass: st.LastClass, LastError: st.LastError,
			Latched: st.Latched, Refreshing: st.Refreshing, TokenRequests: d.auth.coord.TokenRequests(serverKey(s)),
			Expiry: timePtr(st.Expiry), LastRefresh: timePtr(st.LastRefresh), CooldownUntil: timePtr(st.CooldownUntil), NextProactive: timePtr(st.NextProactive),
		}
		out = append(out, as)
	}
	if want != "" && len(out) == 0 {
		if _, err := d.httpServer(want); err != nil {
			return err
		}
	}
	return writeJSON(w, out)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// handleDrillRefresh simulates concurrent refresh at expiry: the stored
// access token is marked expired (the refresh token kept), N concurrent
// upstream requests and one proactive refresh race for it, and the report
// counts the token requests that went out (1 is the only right answer),
// the calls that succeeded, and whether the grant still works.
func (d *Daemon) handleDrillRefresh(w http.ResponseWriter, r *http.Request) error {
	var req api.RefreshDrillRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Callers == 0 {
		req.Callers = 50
	}
	if req.Callers < 1 || req.Callers > 1000 {
		return badRequest("callers must be between 1 and 1000")
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	conn, ok := d.mgr.Get(s.Name)
	if !ok {
		return notFound("no server named %q", s.Name)
	}
	key := serverKey(s)
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	tok, err := d.auth.store.Token(ctx, key)
	if err != nil {
		return &apiError{http.StatusConflict, api.CodeConflict, fmt.Sprintf("not signed in to %s: run 'mcpx login %s' first", s.Name, s.Name)}
	}
	if tok.RefreshToken == "" {
		return &apiError{http.StatusConflict, api.CodeConflict, fmt.Sprintf("the grant for %s has no refresh token: nothing to drill (the server did not issue one; see 'mcpx auth status %s')", s.Name, s.Name)}
	}
	out := newNDJSON(w)
	progress := func(format string, a ...any) {
		out.send(api.RefreshDrillEvent{Type: "progress", Time: time.Now().UTC(), Message: fmt.Sprintf(format, a...)})
	}
	rep := api.RefreshDrillReport{Server: s.Name, Callers: req.Callers, Notes: []string{}}
	if err := d.auth.coord.ExpireAccessToken(ctx, key); err != nil {
		out.send(api.RefreshDrillEvent{Type: "error", Time: time.Now().UTC(), Error: &api.ErrorDetail{Code: api.CodeInternal, Message: redact.Text(err.Error())}})
		return nil
	}
	progress("marked the access token of %s expired (refresh token kept)", s.Name)
	before := d.auth.coord.TokenRequests(key)
	progress("firing %d concurrent upstream requests and one proactive refresh", req.Callers)

	lat := make([]time.Duration, req.Callers)
	errs := make([]error, req.Callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < req.Callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			t0 := time.Now()
			_, errs[i] = conn.ListTools(ctx)
			lat[i] = time.Since(t0)
		}(i)
	}
	wg.Add(1)
	var proactiveErr error
	go func() {
		defer wg.Done()
		<-start
		_, proactiveErr = d.auth.coord.Refresh(ctx, key, oauth.TriggerProactive, nil)
	}()
	close(start)
	wg.Wait()
	rep.TokenRequests = d.auth.coord.TokenRequests(key) - before
	for _, e := range errs {
		if e == nil {
			rep.Succeeded++
		} else {
			rep.Failed++
		}
	}
	if proactiveErr != nil {
		rep.Notes = append(rep.Notes, "proactive refresh: "+redact.Text(proactiveErr.Error()))
	}
	for _, e := range errs {
		if e != nil {
			rep.Notes = append(rep.Notes, "first failed call: "+redact.Text(e.Error()))
			break
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rep.P50MS = ms(lat[len(lat)/2])
	rep.P99MS = ms(lat[(len(lat)*99)/100])
	progress("%d token request(s) sent; %d of %d calls succeeded", rep.TokenRequests, rep.Succeeded, req.Callers)

	// The grant must still work: a fresh refresh and a call afterwards.
	progress("checking that the grant still works")
	if err := d.auth.coord.ExpireAccessToken(ctx, key); err == nil {
		before2 := d.auth.coord.TokenRequests(key)
		_, err := conn.ListTools(ctx)
		rep.GrantIntact = err == nil && d.auth.coord.TokenRequests(key)-before2 == 1
		if err != nil {
			rep.Notes = append(rep.Notes, "follow-up call after a second refresh failed: "+redact.Text(err.Error()))
		}
	}
	switch {
	case rep.TokenRequests == 1 && rep.Failed == 0 && rep.GrantIntact:
		rep.Verdict = api.VerdictPass
	default:
		rep.Verdict = api.VerdictFail
		if rep.TokenRequests > 1 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d token requests for one expiry: a refresh race (an authorization server with reuse detection revokes the grant)", rep.TokenRequests))
		}
		if rep.TokenRequests == 0 {
			rep.Notes = append(rep.Notes, "no token request went out: the refresh did not run")
		}
	}
	out.send(api.RefreshDrillEvent{Type: "report", Time: time.Now().UTC(), Report: &rep})
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
