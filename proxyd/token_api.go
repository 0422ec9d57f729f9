package proxyd

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/oauth"
)

// maxStaticToken bounds a stored static token.
const maxStaticToken = 16 << 10

// handleSetToken stores a static bearer token for an HTTP server (a
// personal access token or API key that needs no sign-in): it goes to the
// token store like a sign-in's token, with no expiry and no refresh token,
// and the connection is made again with it. It is never logged.
func (d *Daemon) handleSetToken(w http.ResponseWriter, r *http.Request) error {
	var req api.SetTokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	s, err := d.httpServer(req.Server)
	if err != nil {
		return err
	}
	tok := strings.TrimSpace(req.Token)
	tok = strings.TrimPrefix(tok, "Bearer ")
	switch {
	case tok == "":
		return badRequest("the token is empty")
	case len(tok) > maxStaticToken:
		return badRequest("the token is longer than %d bytes", maxStaticToken)
	case strings.ContainsAny(tok, " \t\r\n"):
		return badRequest("the token holds whitespace: give the token alone, one line")
	}
	key := serverKey(s)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	_, prevErr := d.auth.store.Token(ctx, key)
	if _, err := d.auth.coord.SaveLogin(ctx, key, s.Name, &oauth.Token{AccessToken: tok, TokenType: "Bearer", Obtained: time.Now()}); err != nil {
		return err
	}
	d.auth.setSignedIn(key, true)
	d.log.Info("static token stored", "server", s.Name)
	if c, ok := d.mgr.Get(s.Name); ok {
		c.Reconnect()
	}
	return writeJSON(w, api.SetTokenResult{Server: s.Name, Stored: true, Replaced: prevErr == nil})
}
