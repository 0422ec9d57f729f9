package api

import (
	"context"
	"net/http"
)

// SetTokenRequest is POST /v1/auth/token: store a static bearer token (a
// personal access token, an API key) for Server in the token store.
type SetTokenRequest struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// SetTokenResult answers SetTokenRequest; the token never comes back.
type SetTokenResult struct {
	Server string `json:"server"`
	Stored bool   `json:"stored"`
	// Replaced: a grant (a sign-in or an earlier token) was there before.
	Replaced bool `json:"replaced"`
}

// SetToken is POST /v1/auth/token.
func (c *Client) SetToken(ctx context.Context, server, token string) (*SetTokenResult, error) {
	var r SetTokenResult
	return &r, c.do(ctx, http.MethodPost, "/v1/auth/token", SetTokenRequest{Server: server, Token: token}, &r)
}
