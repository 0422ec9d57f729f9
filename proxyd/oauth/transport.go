package oauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// NewBearerTransport returns a RoundTripper that sends key's access token
// from c (refreshing it when due) and, when the upstream answers 401 to a
// token, refreshes once through the coordinator and retries the request
// once, if its body can be replayed. Any Authorization header of the
// incoming request is replaced: only mcpx's own credentials go upstream.
func NewBearerTransport(next http.RoundTripper, c *Coordinator, key string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &bearer{next: next, c: c, key: key}
}

type bearer struct {
	next http.RoundTripper
	c    *Coordinator
	key  string
}

const maxBufferedBody = 64 << 10

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, err := b.c.Token(ctx, b.key)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	resp, err := b.send(req, tok)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusUnauthorized && tok.Binding() == "DPoP" && useDPoPNonce(resp) && replayable(req) {
		// The server wants its nonce in the proof (RFC 9449 §9): once.
		if retry, ok := rewind(req, resp); ok {
			if resp, err = b.send(retry, tok); err != nil {
				return resp, err
			}
		}
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
	case http.StatusForbidden:
		// insufficient_scope: the next sign-in asks for more (step-up).
		cs, _ := discovery.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		if ch := discovery.BearerChallenge(cs); ch != nil && ch.Error == "insufficient_scope" {
			b.c.noteInsufficientScope(b.key, ch)
		}
		return resp, nil
	default:
		if resp.StatusCode < 400 && b.c.stepUpAwaiting(b.key) && confirmsScope(req) {
			b.c.stepUpSucceeded(b.key)
		}
		return resp, nil
	}
	if !replayable(req) {
		return resp, nil
	}
	// Keep the 401 intact for the caller in case the refresh cannot help.
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBufferedBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	fresh, ferr := b.c.Refresh(ctx, b.key, TriggerUnauthorized, tok)
	if ferr != nil || fresh.AccessToken == tok.AccessToken {
		return resp, nil
	}
	retry := req.Clone(ctx)
	if req.GetBody != nil {
		nb, gerr := req.GetBody()
		if gerr != nil {
			return resp, nil
		}
		retry.Body = nb
	}
	return b.send(retry, fresh)
}

// send presents t: as a bearer token, or bound to its grant's key with a
// fresh DPoP proof (RFC 9449 §7), the server's last nonce included.
func (b *bearer) send(req *http.Request, t *Token) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Del("Cookie")
	if t.Binding() != "DPoP" {
		r.Header.Set("Authorization", "Bearer "+t.AccessToken)
		return b.next.RoundTrip(r)
	}
	proof, err := dpopProof(t.DPoPKey, req.Method, req.URL.String(), t.AccessToken, nonces.get(req.URL), b.c.opts.Now())
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("upstream credentials: %w", err)
	}
	r.Header.Set("Authorization", "DPoP "+t.AccessToken)
	r.Header.Set("DPoP", proof)
	resp, err := b.next.RoundTrip(r)
	if err == nil {
		nonces.note(req.URL, resp)
	}
	return resp, err
}

// useDPoPNonce reports a DPoP challenge asking for the server's nonce.
func useDPoPNonce(resp *http.Response) bool {
	if resp.Header.Get("DPoP-Nonce") == "" {
		return false
	}
	cs, _ := discovery.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	for _, c := range cs {
		if strings.EqualFold(c.Scheme, "dpop") && c.Error == "use_dpop_nonce" {
			return true
		}
	}
	return false
}

// confirmsScope reports whether a successful answer to req shows that a
// step-up sign-in obtained what the server wanted: the protocol's work
// (a list, a call), not the session setup (initialize, notifications) or
// a stream (GET, DELETE) that servers let through on lesser scopes. A
// server that admits initialize and refuses the rest must still meet the
// step-up limit however its reconnects interleave with the sign-ins.
func confirmsScope(req *http.Request) bool {
	if req.Method != http.MethodPost {
		return false
	}
	m := req.Header.Get("Mcp-Method")
	if m == "" {
		if req.GetBody == nil {
			return false
		}
		body, err := req.GetBody()
		if err != nil {
			return false
		}
		b, err := io.ReadAll(io.LimitReader(body, maxBufferedBody))
		_ = body.Close()
		if err != nil {
			return false
		}
		m = relay.StringMember(b, "method")
	}
	return m != "" && m != "initialize" && !strings.HasPrefix(m, "notifications/")
}

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind drains resp and returns req ready to be sent again.
func rewind(req *http.Request, resp *http.Response) (*http.Request, bool) {
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		nb, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		retry.Body = nb
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBufferedBody))
	_ = resp.Body.Close()
	return retry, true
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// IsAuthorizationRequired reports whether err (from a call through a
// bearer transport) needs the user to sign in again.
func IsAuthorizationRequired(err error) bool { return errors.Is(err, ErrAuthorizationRequired) }
