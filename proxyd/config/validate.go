package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/http/httpguts"

	"github.com/mcpx-dev/mcpx/internal/secretref"
)

var (
	nameRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)
	prefixRe = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// managedHeaders are set by mcpx or the HTTP stack on every request; a
// configured value would break the transport or the session.
var managedHeaders = map[string]bool{
	"content-length":       true,
	"transfer-encoding":    true,
	"connection":           true,
	"host":                 true,
	"mcp-session-id":       true,
	"mcp-protocol-version": true,
}

// Validate checks every value. Problems are *Error values (joined with
// errors.Join when there are several) that point into the file when the
// Config came from Parse or Load.
func (c *Config) Validate() error {
	var errs []*Error
	v := &validator{src: c.src, errs: &errs}
	if c.src != nil {
		v.file = c.src.file
	}
	v.listen(c.Listen)
	if c.Activity.MaxAge < 0 {
		v.add("activity.max_age", "activity max_age must not be negative", "use a positive duration such as 720h")
	}
	if c.Activity.MaxRows < 0 {
		v.add("activity.max_rows", "activity max_rows must not be negative", fmt.Sprintf("use a positive count (default %d)", DefaultActivityMaxRows))
	}
	v.limits(c.Limits)
	if d := c.Activity.Durability; d != "" && d != "batch" && d != "sync" {
		v.add("activity.durability", fmt.Sprintf("activity durability must be batch or sync, not %q", d), "batch (the default) commits records in batches; sync commits each call's record before the call returns")
	}
	if c.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(c.MetricsListen); err != nil {
			v.add("metrics_listen", fmt.Sprintf("metrics_listen %q is not host:port", c.MetricsListen), "for example metrics_listen: 127.0.0.1:9464")
		} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			v.add("metrics_listen", fmt.Sprintf("metrics_listen %q has an invalid port", c.MetricsListen), "for example metrics_listen: 127.0.0.1:9464")
		}
	}
	if c.State.Postgres != "" {
		if err := checkStateDSN(c.State.Postgres); err != nil {
			v.add("state.postgres", err.Error(),
				"keep the password out of the file: postgres://USER@HOST/DB with PGPASSWORD set, or postgres://USER:${env:PGPASSWORD}@HOST/DB, or the whole DSN as ${file:/run/secrets/mcpx-dsn}")
		}
	}
	firstByName := map[string]int{}
	for i := range c.Servers {
		s := &c.Servers[i]
		sv := v.forServer(c, i)
		sv.server(s, i)
		if s.Name == "" {
			continue
		}
		if j, dup := firstByName[s.Name]; dup {
			hint := "give each server its own name"
			if p := v.src.at(fmt.Sprintf("servers[%d].name", j)); p.line > 0 && sv.src != nil {
				hint = fmt.Sprintf("rename this one or the server on line %d", p.line)
			}
			sv.add("name", fmt.Sprintf("duplicate server name %q", s.Name), hint)
			continue
		}
		firstByName[s.Name] = i
	}
	sort.SliceStable(errs, func(a, b int) bool {
		la, lb := errs[a].Line, errs[b].Line
		if la == 0 || lb == 0 {
			return la != 0 && lb == 0
		}
		if la != lb {
			return la < lb
		}
		return errs[a].Column < errs[b].Column
	})
	return joinErrors(errs)
}

type validator struct {
	file   string
	src    *source
	prefix string // path of the server being checked, "" at the top level
	where  string
	errs   *[]*Error
}

func (v *validator) path(p string) string {
	if v.prefix == "" {
		return p
	}
	if p == "" {
		return v.prefix
	}
	if strings.HasPrefix(p, "[") {
		return v.prefix + p
	}
	return v.prefix + "." + p
}

func (v *validator) addAt(at pos, msg, hint string) {
	e := &Error{File: v.file, Line: at.line, Column: at.col, Msg: msg, Hint: hint}
	*v.errs = append(*v.errs, e)
}

// add reports a problem with the value at path.
func (v *validator) add(p, msg, hint string) {
	if v.src == nil {
		v.addAt(pos{}, msg, hint)
		return
	}
	v.addAt(v.src.at(v.path(p)), msg, hint)
}

// addKey reports a problem with the key at path itself.
func (v *validator) addKey(p, msg, hint string) {
	if v.src == nil {
		v.addAt(pos{}, msg, hint)
		return
	}
	v.addAt(v.src.keyAt(v.path(p)), msg, hint)
}

// forServer returns a validator for server i. Positions are used only when
// the server is still where parsing found it.
func (v *validator) forServer(c *Config, i int) *validator {
	sv := &validator{file: v.file, errs: v.errs, prefix: fmt.Sprintf("servers[%d]", i)}
	if c.src != nil && i < len(c.src.names) && c.src.names[i] == c.Servers[i].Name {
		sv.src = c.src
	}
	sv.where = serverWhere(c.Servers[i].Name, i)
	return sv
}

func (v *validator) listen(addr string) {
	if addr == "" {
		return
	}
	if err := checkListen(addr); err != nil {
		v.add("listen", err.Error(), "proxyd serves MCP clients on this machine only: use a loopback address such as "+DefaultListen)
	}
}

func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen %q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("listen %q has an invalid port", addr)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("listen %q is not a loopback address; proxyd only listens on loopback (127.0.0.0/8, ::1, localhost)", addr)
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// prefixOf checks a server's prefix: exposed names must keep to MCP's
// name characters, and "prefix:" with no value would silently mean the
// default, so it is refused.
func (v *validator) prefixOf(s *Server, where string) {
	switch {
	case s.Prefix == nil:
		if v.src.has(v.path("prefix")) {
			v.add("prefix", fmt.Sprintf("%sprefix has no value", prefix(where)),
				"write `prefix: \"\"` to expose the upstream's names unchanged, or remove prefix for the default <name>__")
		}
	case !prefixRe.MatchString(*s.Prefix):
		v.add("prefix", fmt.Sprintf("%sprefix %q has characters tool names cannot hold", prefix(where), *s.Prefix),
			"use letters, digits, '_', '-' and '.', e.g. `prefix: \"gh_\"`")
	case len(*s.Prefix) > MaxPrefixLen:
		v.add("prefix", fmt.Sprintf("%sprefix %q is longer than %d characters", prefix(where), *s.Prefix, MaxPrefixLen),
			"shorten it: exposed names are at most 64 characters and must keep room for the tool's own name")
	}
}

func (v *validator) server(s *Server, i int) {
	where := v.where
	switch {
	case s.Name == "":
		v.add("", fmt.Sprintf("servers entry %d has no name", i+1), "add a short name such as `name: docs`")
	case !nameRe.MatchString(s.Name):
		v.add("name", fmt.Sprintf("invalid server name %q", s.Name),
			"use 1-31 lower-case letters, digits and '-', starting with a letter or digit; no '_', because tools are exposed as <server>__<tool>")
	}

	remote, local := s.URL != "", s.Command != ""
	switch {
	case remote && local:
		v.addKey("command", fmt.Sprintf("%s has both url and command", where), "keep url for a remote server or command for a local stdio server, not both")
	case !remote && !local:
		v.add("", fmt.Sprintf("%s has neither url nor command", where), "add `url: https://host/mcp` for a remote server or `command: ...` for a local stdio server")
	}
	if remote {
		if err := checkServerURL(s.URL); err != nil {
			v.add("url", fmt.Sprintf("%s%v", prefix(where), err), "use an absolute http:// or https:// URL with a host and no user:password@ part (credentials belong in oauth)")
		}
	}
	if local && strings.TrimSpace(s.Command) == "" {
		v.add("command", fmt.Sprintf("%scommand is blank", prefix(where)), "name the program to run, e.g. `command: npx`")
	}

	switch s.Transport {
	case "":
	case TransportStdio:
		if !local && remote {
			v.add("transport", fmt.Sprintf("%stransport stdio needs command, not url", prefix(where)), "remove transport (url servers default to streamable-http) or use sse")
		}
	case TransportStreamableHTTP, TransportSSE:
		if !remote && local {
			v.add("transport", fmt.Sprintf("%stransport %s needs url, not command", prefix(where), s.Transport), "remove transport (command servers default to stdio)")
		}
	default:
		v.add("transport", fmt.Sprintf("%sunknown transport %q", prefix(where), s.Transport), "use streamable-http, sse or stdio")
	}
	switch s.Protocol {
	case "", ProtocolAuto, ProtocolLegacy, ProtocolModern:
	default:
		v.add("protocol", fmt.Sprintf("%sunknown protocol %q", prefix(where), s.Protocol), "use auto (negotiate), legacy (session era) or modern (session-less era)")
	}

	v.prefixOf(s, where)
	v.headers(s.Headers, where, s.Name)
	if s.TLS != nil && s.TLS.CAFile == "" || s.TLS == nil && v.src.has(v.path("tls")) {
		v.add("tls", fmt.Sprintf("%stls is given without ca_file", prefix(where)), "set `tls: {ca_file: /path/to/ca.pem}` or remove tls")
	}
	if s.OAuth != nil {
		v.oauth(s.OAuth, where)
	}
	for k, val := range s.Env {
		ep := "env[" + k + "]"
		if !envKeyRe.MatchString(k) {
			v.addKey(ep, fmt.Sprintf("%sinvalid environment variable name %q", prefix(where), k), "use letters, digits and '_', not starting with a digit")
		}
		if strings.ContainsRune(val, 0) {
			v.add(ep, fmt.Sprintf("%senvironment variable %q contains a NUL byte", prefix(where), k), "remove the NUL character")
		}
	}
	for j, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			v.add(fmt.Sprintf("args[%d]", j), fmt.Sprintf("%sargument %d contains a NUL byte", prefix(where), j+1), "remove the NUL character")
		}
	}
	if s.MaxResponseBytes < 0 {
		v.add("max_response_bytes", fmt.Sprintf("%smax_response_bytes must not be negative", prefix(where)), "use a size in bytes such as 16777216, or leave it out for the 16 MiB default")
	}
	if s.Timeout < 0 {
		v.add("timeout", fmt.Sprintf("%stimeout must not be negative", prefix(where)), "use a positive duration such as 60s")
	}
	if s.StreamIdleTimeout < 0 {
		v.add("stream_idle_timeout", fmt.Sprintf("%sstream_idle_timeout must not be negative", prefix(where)), "use a positive duration such as 5m")
	}

	// Keys that only make sense for the other kind of server are mistakes,
	// not settings to ignore silently.
	if remote && !local {
		if len(s.Args) > 0 || v.src.has(v.path("args")) {
			v.addKey("args", fmt.Sprintf("%sargs apply only to command servers", prefix(where)), "remove args, or replace url with command")
		}
		if len(s.Env) > 0 || v.src.has(v.path("env")) {
			v.addKey("env", fmt.Sprintf("%senv applies only to command servers", prefix(where)), "remove env; send values to a remote server with headers")
		}
	}
	if local && !remote {
		for _, k := range []struct {
			key string
			set bool
		}{{"headers", len(s.Headers) > 0}, {"tls", s.TLS != nil}, {"oauth", s.OAuth != nil}} {
			if k.set || v.src.has(v.path(k.key)) {
				v.addKey(k.key, fmt.Sprintf("%s%s applies only to url servers", prefix(where), k.key), "remove "+k.key+", or replace command with url")
			}
		}
	}
}

// checkServerURL never echoes the URL: user information or a query may
// carry a credential.
func checkServerURL(raw string) error {
	if strings.IndexFunc(raw, unicode.IsSpace) >= 0 {
		return fmt.Errorf("url contains whitespace")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url does not parse")
	}
	if u.User != nil {
		return fmt.Errorf("url must not contain user information")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url must start with http:// or https://, not %q", u.Scheme+":")
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("url has no host")
	}
	return nil
}

func (v *validator) headers(h map[string]string, where, name string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		hp := "headers[" + k + "]"
		switch {
		case secretref.Check(h[k]) != nil:
			v.addKey(hp, fmt.Sprintf("%sheader %s: %v", prefix(where), k, secretref.Check(h[k])), "write ${env:NAME} or ${file:PATH}")
		case credentialHeader(k) && !secretref.Has(h[k]):
			v.addKey(hp, fmt.Sprintf("%sheader %s holds a credential written into the config file", prefix(where), k),
				"reference it instead: \"Bearer ${env:NAME}\" or \"${file:/run/secrets/NAME}\" (resolved by proxyd when it connects), store it with `mcpx auth set-token "+name+"`, or sign in with `mcpx login "+name+"`")
		case !httpguts.ValidHeaderFieldName(k):
			v.addKey(hp, fmt.Sprintf("%sinvalid header name %q", prefix(where), k), "use letters, digits and - (e.g. X-Team)")
		case managedHeaders[strings.ToLower(k)]:
			v.addKey(hp, fmt.Sprintf("%sheader %s is managed by mcpx", prefix(where), k), "remove it")
		}
		if !httpguts.ValidHeaderFieldValue(h[k]) {
			v.add(hp, fmt.Sprintf("%sheader %s has an invalid value (control characters such as CR or LF)", prefix(where), k), "put the value on one line without control characters")
		}
	}
}

// credentialHeader: a header whose value is a credential, which the
// config may hold only as a reference.
func credentialHeader(k string) bool {
	k = strings.ToLower(k)
	return k == "authorization" || k == "proxy-authorization" || k == "cookie"
}

// secretLookingHeader: a header whose name says it carries a secret; a
// literal value gets a warning.
func secretLookingHeader(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"token", "secret", "key", "password", "auth"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func (v *validator) oauth(o *OAuth, where string) {
	endpoints := []struct{ key, val string }{
		{"authorization_endpoint", o.AuthorizationEndpoint},
		{"token_endpoint", o.TokenEndpoint},
		{"registration_endpoint", o.RegistrationEndpoint},
		{"auth_server_metadata_url", o.AuthServerMetadataURL},
		{"client_metadata_url", o.ClientMetadataURL},
	}
	if idp := o.IdentityProvider; idp != nil {
		endpoints = append(endpoints, struct{ key, val string }{"identity_provider.issuer", idp.Issuer},
			struct{ key, val string }{"identity_provider.token_endpoint", idp.TokenEndpoint})
	}
	for _, f := range endpoints {
		if f.val == "" {
			continue
		}
		if err := ValidateEndpointURL(f.key, f.val); err != nil {
			e := err.(*Error)
			v.add("oauth."+f.key, prefix(where)+e.Msg, e.Hint)
		}
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		v.addKey("oauth.client_secret", fmt.Sprintf("%soauth client_secret is set without client_id", prefix(where)), "add the client_id the secret belongs to, or remove client_secret to use dynamic registration")
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.IndexFunc(sc, unicode.IsSpace) >= 0 {
			v.add(fmt.Sprintf("oauth.scopes[%d]", i), fmt.Sprintf("%sinvalid oauth scope %q", prefix(where), sc), "list each scope as its own item, e.g. `scopes: [read, write]`")
		}
	}
	grant := o.EffectiveGrant()
	// A browser sign-in's client secret may still be written inline (it
	// was before references existed); every other secret is a reference.
	if grant == GrantAuthorizationCode {
		v.secretRef(o.ClientSecret, "client_secret", where, false)
	} else {
		v.secretRef(o.ClientSecret, "client_secret", where, true)
	}
	v.secretRef(o.PrivateKey, "private_key", where, true)
	v.secretRef(o.Assertion, "assertion", where, true)
	if idp := o.IdentityProvider; idp != nil {
		v.secretRef(idp.ClientSecret, "identity_provider.client_secret", where, true)
		v.secretRef(idp.IDToken, "identity_provider.id_token", where, true)
	}
	if o.PrivateKey != "" && o.ClientSecret != "" {
		v.addKey("oauth.private_key", fmt.Sprintf("%soauth sets both client_secret and private_key", prefix(where)), "keep the one the authorization server has for this client")
	}
	v.authMethod(o, where)
	need := func(key string, ok bool, why, hint string) {
		if !ok {
			v.add("oauth", fmt.Sprintf("%soauth grant %s needs %s (%s)", prefix(where), grant, key, why), hint)
		}
	}
	switch grant {
	case GrantAuthorizationCode:
	case GrantClientCredentials:
		need("client_id", o.ClientID != "", "the client the authorization server issued", "add `client_id: ...` with `client_secret: ${env:NAME}` or `private_key: ${file:PATH}`")
		need("client_secret or private_key", o.ClientSecret != "" || o.PrivateKey != "", "the client authenticates itself",
			"add `client_secret: ${env:NAME}` (client_secret_basic) or `private_key: ${file:/path/key.pem}` (private_key_jwt)")
	case GrantJWTBearer:
		need("assertion", o.Assertion != "", "the workload identity token to exchange",
			"add `assertion: ${file:/var/run/secrets/tokens/mcp}` or `assertion: ${env:ID_TOKEN}`")
	case GrantTokenExchange:
		idp := o.IdentityProvider
		need("client_id", o.ClientID != "", "the client the identity assertion names", "add `client_id: ...` and `client_secret: ${env:NAME}`")
		need("identity_provider", idp != nil, "the enterprise IdP that issues the identity assertion",
			"add `identity_provider: {issuer: https://idp.example.com, client_id: ..., id_token: ${file:PATH}}`")
		if idp != nil {
			need("identity_provider.issuer or identity_provider.token_endpoint", idp.Issuer != "" || idp.TokenEndpoint != "", "where to exchange the ID token", "add `issuer: https://idp.example.com`")
			need("identity_provider.client_id", idp.ClientID != "", "mcpx's client at the IdP", "add `client_id: ...` under identity_provider")
			need("identity_provider.id_token", idp.IDToken != "", "the user's ID token to exchange", "add `id_token: ${file:PATH}` or `id_token: ${env:NAME}` under identity_provider")
		}
	default:
		v.add("oauth.grant", fmt.Sprintf("%sunknown oauth grant %q", prefix(where), o.Grant),
			"use authorization_code (browser sign-in), client_credentials, jwt_bearer (workload identity) or token_exchange (enterprise-managed)")
	}
	if o.Assertion != "" && grant != GrantJWTBearer {
		v.addKey("oauth.assertion", fmt.Sprintf("%soauth assertion is used only by grant: jwt_bearer", prefix(where)), "set `grant: jwt_bearer` or remove assertion")
	}
	if o.IdentityProvider != nil && grant != GrantTokenExchange {
		v.addKey("oauth.identity_provider", fmt.Sprintf("%soauth identity_provider is used only by grant: token_exchange", prefix(where)), "set `grant: token_exchange` or remove identity_provider")
	}
}

// authMethod checks token_endpoint_auth_method against the credentials
// configured for it.
func (v *validator) authMethod(o *OAuth, where string) {
	m := o.TokenEndpointAuthMethod
	var ok bool
	switch m {
	case "":
		return
	case "client_secret_basic", "client_secret_post":
		ok = o.ClientSecret != ""
	case "private_key_jwt":
		ok = o.PrivateKey != ""
	case "none":
		ok = o.ClientSecret == "" && o.PrivateKey == ""
	default:
		v.add("oauth.token_endpoint_auth_method", fmt.Sprintf("%sunknown token_endpoint_auth_method %q", prefix(where), m),
			"use client_secret_basic, client_secret_post, private_key_jwt or none")
		return
	}
	if !ok {
		v.add("oauth.token_endpoint_auth_method", fmt.Sprintf("%stoken_endpoint_auth_method %s does not match the configured credentials", prefix(where), m),
			"client_secret_* needs client_secret, private_key_jwt needs private_key, none needs neither")
	}
}

// secretRef checks a secret setting: a reference, or with inlineOK also
// the value itself.
func (v *validator) secretRef(val, key, where string, refOnly bool) {
	if val == "" {
		return
	}
	if err := secretref.Check(val); err != nil {
		v.add("oauth."+key, fmt.Sprintf("%soauth %s: %v", prefix(where), key, err), "write ${env:NAME} or ${file:PATH}")
		return
	}
	if refOnly && (!secretref.Has(val) || secretref.Strip(val) != "") {
		v.add("oauth."+key, fmt.Sprintf("%soauth %s must be a reference, not the secret itself", prefix(where), key),
			"keep the secret out of the file: `"+key[strings.LastIndex(key, ".")+1:]+": ${env:NAME}` or `${file:/path}`")
	}
}

// ValidateEndpointURL checks an OAuth endpoint override: https, or http
// only on a loopback host; no query, fragment, user information or
// whitespace. field names the config key in the message. The error is an
// *Error without a position.
func ValidateEndpointURL(field, raw string) error {
	bad := func(why string) error {
		return &Error{Msg: fmt.Sprintf("oauth %s %s", field, why),
			Hint: "use an https:// URL (http:// only for localhost or 127.0.0.1) without ?query, #fragment or user:password@"}
	}
	if raw == "" {
		return bad("is empty")
	}
	if strings.IndexFunc(raw, unicode.IsSpace) >= 0 {
		return bad("contains whitespace")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a valid URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http":
		if !isLoopbackHost(u.Hostname()) {
			return bad("uses http:// on a non-loopback host")
		}
	default:
		return bad("must be an https:// URL")
	}
	switch {
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return bad("has no host")
	case u.User != nil:
		return bad("must not contain user information")
	case u.RawQuery != "" || u.ForceQuery:
		return bad("must not have a query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment")
	}
	return nil
}

// checkStateDSN refuses a DSN that carries a password inline; references
// are fine.
func checkStateDSN(raw string) error {
	if err := secretref.Check(raw); err != nil {
		return fmt.Errorf("state.postgres: %w", err)
	}
	lit := secretref.Strip(raw)
	if strings.HasPrefix(lit, "postgres://") || strings.HasPrefix(lit, "postgresql://") {
		u, err := url.Parse(lit)
		if err != nil {
			if secretref.Has(raw) {
				return nil // the reference completes it
			}
			return errors.New("state.postgres is not a valid postgres:// URL")
		}
		if pw, ok := u.User.Password(); ok && pw != "" {
			return errors.New("state.postgres must not contain a password")
		}
		if u.Query().Get("password") != "" {
			return errors.New("state.postgres must not contain a password")
		}
		return nil
	}
	for _, kv := range strings.Fields(lit) {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == "password" && strings.Trim(v, "'") != "" {
			return errors.New("state.postgres must not contain a password")
		}
	}
	return nil
}
