package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// authFacts is the data of the auth step.
type authFacts struct {
	Challenge             *challengeFacts     `json:"challenge,omitempty"`
	ResourceMetadataURL   string              `json:"resource_metadata_url,omitempty"`
	Resource              string              `json:"resource,omitempty"`
	ResourceMatches       *bool               `json:"resource_matches,omitempty"`
	AuthorizationServer   string              `json:"authorization_server,omitempty"`
	AuthServerMetadataURL string              `json:"auth_server_metadata_url,omitempty"`
	Issuer                string              `json:"issuer,omitempty"`
	Endpoints             map[string]string   `json:"endpoints,omitempty"`
	Overridden            []string            `json:"overridden,omitempty"`
	Attempts              []attemptFacts      `json:"attempts"`
	Lint                  []discovery.Finding `json:"lint,omitempty"`
	Warnings              []string            `json:"warnings,omitempty"`
	Scopes                []string            `json:"scopes,omitempty"`
	BrokenStep            string              `json:"broken_step,omitempty"`
}

// attemptFacts is one discovery fetch with its place on the probe's time
// axis (absent when the discovery came from the cache).
type attemptFacts struct {
	discovery.Attempt
	StartMS    float64 `json:"start_ms,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"`
}

// timedAttempts places the fetches of a discovery on the time axis.
func (r *runner) timedAttempts(atts []discovery.Attempt, cached bool) []attemptFacts {
	out := make([]attemptFacts, 0, len(atts))
	for _, a := range atts {
		f := attemptFacts{Attempt: a}
		// A fetch from before this probe came from the discovery cache.
		if !cached && !a.Start.Before(r.t0) && !a.End.IsZero() {
			f.StartMS = r.offset(a.Start)
			f.DurationMS = ms(a.End.Sub(a.Start))
		}
		out = append(out, f)
	}
	return out
}

type challengeFacts struct {
	Scheme           string `json:"scheme"`
	ResourceMetadata string `json:"resource_metadata,omitempty"`
	Scope            string `json:"scope,omitempty"`
	Error            string `json:"error,omitempty"`
	ErrorDescription string `json:"error_description,omitempty"`
	ParseError       string `json:"parse_error,omitempty"`
}

// discoverer is private to the probe and caches nothing: discovery runs on
// the probe's own transport (its CA file applies to metadata fetches too)
// and fresh, wherever the probe runs.
func (r *runner) discoverer() *discovery.Discoverer {
	base := r.client.Transport.(*recorder).base
	return discovery.New(discovery.NewHTTPClient(base, r.opts.Timeout), discovery.WithTTL(0, 0))
}

// authStep follows the discovery chain of a protected server.
func (r *runner) authStep(ctx context.Context, e401 *exchange) {
	start := time.Now()
	facts := authFacts{}
	var ch *discovery.Challenge
	if len(e401.wwwAuth) > 0 {
		cs, perr := discovery.ParseWWWAuthenticate(e401.wwwAuth)
		ch = discovery.BearerChallenge(cs)
		cf := &challengeFacts{}
		if ch != nil {
			cf.Scheme = ch.Scheme
			cf.ResourceMetadata = ch.ResourceMetadata
			cf.Scope = ch.Scope
			cf.Error = ch.Error
			cf.ErrorDescription = ch.ErrorDescription
		} else if len(cs) > 0 {
			cf.Scheme = cs[0].Scheme
		}
		if perr != nil {
			cf.ParseError = perr.Error()
		}
		facts.Challenge = cf
	}
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	res, err := r.discoverer().DiscoverServer(sctx, sanitizeURL(r.target), ch, r.opts.OAuth, nil)
	if err != nil {
		var de *discovery.Error
		if errors.As(err, &de) {
			facts.Attempts = r.timedAttempts(de.Attempts, false)
			facts.BrokenStep = de.Step
		}
		out := discoveryFailure(de, err, e401.Status)
		if res, ok := walk(err); ok {
			if de == nil {
				// Not a broken link but the fetch itself (timeout ...).
				out = res
				out.Message = "OAuth discovery: " + res.Message
			} else {
				// The link broke because its fetch failed below HTTP:
				// that layer's hint is the useful one.
				out.Hint = "fetching " + orNone(de.URL) + " failed (" + res.Code + "): " + res.Hint
			}
		}
		detail := out.Message
		if tried := attemptsSummary(facts.Attempts); tried != "" {
			detail += "; tried " + tried
		}
		r.add(StepAuth, StatusFail, start, challengeSummary(facts.Challenge)+detail, facts)
		r.setResult(out)
		return
	}
	facts.ResourceMetadataURL = res.ResourceMetadataURL
	if res.Resource != nil {
		facts.Resource = res.Resource.Resource
		m := !res.ResourceMismatch
		facts.ResourceMatches = &m
	}
	facts.AuthorizationServer = res.AuthServerURL
	facts.AuthServerMetadataURL = res.AuthServerMetadataURL
	facts.Overridden = res.Overridden
	facts.Attempts = r.timedAttempts(res.Attempts, res.Cached)
	facts.Warnings = res.Warnings
	facts.Scopes = res.Scopes
	if md := res.Metadata; md != nil {
		facts.Issuer = md.Issuer
		facts.Endpoints = map[string]string{}
		for k, v := range map[string]string{
			"authorization_endpoint": md.AuthorizationEndpoint,
			"token_endpoint":         md.TokenEndpoint,
			"registration_endpoint":  md.RegistrationEndpoint,
		} {
			if v != "" {
				facts.Endpoints[k] = v
			}
		}
	}
	facts.Lint = discovery.Lint(res.Metadata)

	var fails, warns []string
	var failCheck string
	for _, f := range facts.Lint {
		switch f.Level {
		case discovery.LevelFail:
			if f.Check == "pkce" && r.opts.AllowMissingPKCE && res.Metadata != nil && len(res.Metadata.CodeChallengeMethodsSupported) == 0 {
				warns = append(warns, "code_challenge_methods_supported is absent; allowed by allow_missing_pkce_methods")
				continue
			}
			fails = append(fails, f.Message)
			if failCheck == "" {
				failCheck = f.Check
			}
		case discovery.LevelWarn:
			if f.Check == "registration" && r.opts.OAuthClientID == "" {
				// Without registration and without a configured client id,
				// sign-in cannot start.
				fails = append(fails, f.Message)
				if failCheck == "" {
					failCheck = f.Check
				}
				continue
			}
			warns = append(warns, f.Message)
		}
	}
	if res.ResourceMismatch {
		warns = append(warns, "the protected-resource metadata names a different resource (RFC 9728 §3.3): sign-in will be refused")
	}
	for _, w := range res.Warnings {
		if !containsFold(warns, w) {
			warns = append(warns, w)
		}
	}
	issuer := res.AuthServerURL
	if res.Metadata != nil && res.Metadata.Issuer != "" {
		issuer = res.Metadata.Issuer
	}
	// URLs of each document are in the step's data; the line names the
	// authorization server only.
	detail := challengeSummary(facts.Challenge) + "resource metadata ok; authorization server " + orNone(issuer)
	if res.ResourceMetadataURL == "" {
		detail = challengeSummary(facts.Challenge) + "no resource metadata; authorization server " + orNone(issuer)
	}
	if len(res.Overridden) > 0 {
		detail += "; overridden by config: " + strings.Join(res.Overridden, ", ")
	}
	if len(fails) > 0 {
		detail += "; " + strings.Join(fails, "; ")
		facts.BrokenStep = "lint:" + failCheck
		res := Result{Code: CodeAuthMisconfigured, Reason: failCheck, HTTPStatus: e401.Status,
			Message: "protected server, but a client cannot sign in: " + fails[0],
			Hint:    lintHint(failCheck, r.loginName())}
		r.add(StepAuth, StatusFail, start, detail, facts)
		r.setResult(res)
		return
	}
	status := StatusOK
	var passed []string
	for _, f := range facts.Lint {
		if f.Level == discovery.LevelOK && f.Check != "endpoints" {
			passed = append(passed, f.Check)
		}
	}
	if len(passed) > 0 {
		detail += "; client checks ok: " + strings.Join(passed, ", ")
	}
	if len(warns) > 0 {
		status = StatusWarn
		detail += "; " + strings.Join(warns, "; ")
	}
	r.add(StepAuth, status, start, detail, facts)
	msg := "protected server: sign-in required; OAuth discovery is complete and usable"
	switch {
	case ch != nil && ch.Error == "insufficient_scope":
		msg = fmt.Sprintf("protected server: the token lacks a required scope (%s); OAuth discovery is complete and usable", orNone(ch.Scope))
	case r.opts.BearerToken != "" || hasHeader(r.opts.Headers, "Authorization"):
		msg = "protected server: the credentials sent were refused; OAuth discovery is complete and usable"
	}
	if len(warns) > 0 {
		msg += " (with warnings: see the auth step)"
	}
	r.setResult(Result{Code: CodeAuthRequired, HTTPStatus: e401.Status, Message: msg,
		Hint: r.loginHint()})
}

func (r *runner) loginName() string {
	if r.opts.ServerName != "" {
		return r.opts.ServerName
	}
	return "NAME"
}

func (r *runner) loginHint() string {
	if r.opts.ServerName != "" {
		return fmt.Sprintf("sign in with `mcpx login %s`", r.opts.ServerName)
	}
	return "add it with `mcpx servers add NAME URL`, then sign in with `mcpx login NAME`"
}

func challengeSummary(c *challengeFacts) string {
	if c == nil {
		return "401 without WWW-Authenticate; "
	}
	var params []string
	if c.ResourceMetadata != "" {
		params = append(params, "resource_metadata")
	}
	if c.Scope != "" {
		params = append(params, fmt.Sprintf("scope %q", c.Scope))
	}
	if c.Error != "" {
		params = append(params, "error "+c.Error)
	}
	s := orNone(c.Scheme) + " challenge"
	if len(params) > 0 {
		s += " (" + strings.Join(params, ", ") + ")"
	}
	return s + "; "
}

func attemptsSummary(atts []attemptFacts) string {
	parts := make([]string, 0, len(atts))
	for _, a := range atts {
		p := a.URL + " → "
		switch {
		case a.Used:
			p += "used"
		case a.Status != 0:
			p += fmt.Sprintf("HTTP %d", a.Status)
			if a.Error != "" && a.Status == 200 {
				p += " (" + a.Error + ")"
			}
		case a.Error != "":
			p += a.Error
		default:
			p += "no answer"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func lintHint(check, name string) string {
	switch check {
	case "registration":
		return "the authorization server offers no dynamic client registration: register a client with the provider and set oauth.client_id for " + name
	case "pkce":
		return "the authorization server does not advertise PKCE S256: fix its metadata, or allow it explicitly per server in the config if you know it supports S256"
	case "endpoints":
		return "set oauth.authorization_endpoint and oauth.token_endpoint in the config for " + name
	default:
		return "fix the authorization server's metadata (see the auth step's lint)"
	}
}

// discoveryFailure explains which link of the discovery chain broke.
func discoveryFailure(de *discovery.Error, err error, status int) Result {
	res := Result{Code: CodeAuthMisconfigured, HTTPStatus: status, Message: "OAuth discovery failed: " + clean(err.Error())}
	if de != nil {
		res.Message = "OAuth discovery broken at " + strings.ReplaceAll(de.Step, "_", " ")
		if de.URL != "" {
			res.Message += ": " + de.URL
		}
		if de.Status != 0 && de.Status != 200 {
			res.Message += fmt.Sprintf(" answered HTTP %d", de.Status)
		} else if de.Err != nil {
			res.Message += ": " + clean(de.Err.Error())
		}
	}
	if de == nil {
		res.Hint = "the server answered 401 but its OAuth discovery could not be completed"
		return res
	}
	res.Reason = de.Step
	switch de.Step {
	case discovery.StepResourceMetadata:
		res.Hint = "the server publishes no usable RFC 9728 protected-resource metadata: fix the server, or set oauth.auth_server_metadata_url in the config"
	case discovery.StepResource:
		res.Hint = "the protected-resource metadata names another resource: the server's `resource` must be its own URL"
	case discovery.StepAuthServer:
		res.Hint = "the protected-resource metadata names no usable authorization server: fix `authorization_servers`, or set oauth.auth_server_metadata_url"
	case discovery.StepAuthServerMetadata:
		res.Hint = "the authorization server's metadata (RFC 8414 / OpenID) is missing or invalid: fix it, or set oauth.auth_server_metadata_url or the endpoint overrides in the config"
	case discovery.StepEndpoints:
		res.Hint = "an endpoint in the authorization server metadata is missing or unusable: fix the metadata, or set the oauth.*_endpoint override in the config"
	case discovery.StepOverrides:
		res.Hint = "a configured oauth override is invalid: fix it in the config (https, or http on loopback; no query or fragment)"
	default:
		res.Hint = "see the attempts in the auth step"
	}
	return res
}
