package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// flatten lists the *Error values inside err (a single one or a join).
func flatten(t *testing.T, err error) []*Error {
	t.Helper()
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("error %v (%T) is not a *config.Error", e, e)
		}
		out = append(out, ce)
	}
	walk(err)
	return out
}

const issueExample = `listen: 127.0.0.1:7861        # downstream MCP endpoint
servers:
  - name: docs
    url: https://example.com/mcp
    transport: streamable-http   # streamable-http | sse | stdio
    protocol: auto               # auto | legacy | modern
    headers: {X-Team: infra}
    tls: {ca_file: /path/ca.pem}
    oauth: {client_id: abc, client_secret: xyz, scopes: [read, write],
            authorization_endpoint: https://auth.example.com/authorize, token_endpoint: https://auth.example.com/token,
            registration_endpoint: https://auth.example.com/register, auth_server_metadata_url: https://auth.example.com/.well-known/oauth-authorization-server}
  - name: everything
    transport: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything"]
    env: {LOG_LEVEL: warn}
`

func TestParseIssueExample(t *testing.T) {
	c, err := Parse("config.yaml", []byte(issueExample))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := c.ListenAddr(); got != "127.0.0.1:7861" {
		t.Errorf("ListenAddr = %q", got)
	}
	docs, ok := c.Server("docs")
	if !ok {
		t.Fatal("server docs missing")
	}
	want := Server{
		Name: "docs", URL: "https://example.com/mcp", Transport: TransportStreamableHTTP, Protocol: ProtocolAuto,
		Headers: map[string]string{"X-Team": "infra"},
		TLS:     &TLS{CAFile: "/path/ca.pem"},
		OAuth: &OAuth{
			ClientID: "abc", ClientSecret: "xyz", Scopes: []string{"read", "write"},
			AuthorizationEndpoint: "https://auth.example.com/authorize",
			TokenEndpoint:         "https://auth.example.com/token",
			RegistrationEndpoint:  "https://auth.example.com/register",
			AuthServerMetadataURL: "https://auth.example.com/.well-known/oauth-authorization-server",
		},
		Timeout: Duration(DefaultCallTimeout),
	}
	if !reflect.DeepEqual(*docs, want) {
		t.Errorf("docs =\n%+v\nwant\n%+v", *docs, want)
	}
	ev, ok := c.Server("everything")
	if !ok {
		t.Fatal("server everything missing")
	}
	if ev.EffectiveTransport() != TransportStdio || ev.Command != "npx" || len(ev.Args) != 2 || ev.Env["LOG_LEVEL"] != "warn" {
		t.Errorf("everything = %+v", *ev)
	}
	if _, ok := c.Server("nope"); ok {
		t.Error("Server(nope) found")
	}
	if c.Activity.MaxAge != Duration(720*time.Hour) || c.Activity.MaxRows != 1_000_000 {
		t.Errorf("activity defaults = %+v", c.Activity)
	}
}

func TestEffectiveDefaults(t *testing.T) {
	tests := []struct {
		name      string
		s         Server
		transport string
		protocol  string
		timeout   time.Duration
	}{
		{"url", Server{URL: "https://x/mcp"}, TransportStreamableHTTP, ProtocolAuto, 60 * time.Second},
		{"command", Server{Command: "npx"}, TransportStdio, ProtocolAuto, 60 * time.Second},
		{"explicit", Server{URL: "https://x/mcp", Transport: TransportSSE, Protocol: ProtocolLegacy, Timeout: Duration(5 * time.Second)}, TransportSSE, ProtocolLegacy, 5 * time.Second},
		{"empty", Server{}, "", ProtocolAuto, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.EffectiveTransport(); got != tt.transport {
				t.Errorf("EffectiveTransport = %q, want %q", got, tt.transport)
			}
			if got := tt.s.EffectiveProtocol(); got != tt.protocol {
				t.Errorf("EffectiveProtocol = %q, want %q", got, tt.protocol)
			}
			if got := tt.s.CallTimeout(); got != tt.timeout {
				t.Errorf("CallTimeout = %v, want %v", got, tt.timeout)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		line, col int
		msg, hint string // substrings
	}{
		{"syntax", "listen: [\n", 1, 9, "invalid YAML", "indentation"},
		{"tab indentation", "servers:\n\t- name: a\n", 2, 1, "invalid YAML", ""},
		{"unknown top-level key", "listen: 127.0.0.1:1\nlisen: x\n", 2, 1, `unknown key "lisen" at the top level`, `did you mean "listen"`},
		{"unknown server key", "servers:\n  - name: docs\n    url: https://x/mcp\n    hedaers: {a: b}\n", 4, 5, `unknown key "hedaers" in server "docs"`, `did you mean "headers"`},
		{"unknown oauth key", "servers:\n  - name: docs\n    url: https://x/mcp\n    oauth:\n      client: x\n", 5, 7, `unknown key "client" in oauth of server "docs"`, "client_id"},
		{"unknown tls key", "servers:\n  - name: docs\n    url: https://x/mcp\n    tls: {ca: x}\n", 4, 11, `unknown key "ca" in tls of server "docs"`, "ca_file"},
		{"unknown activity key", "activity:\n  rows: 5\n", 2, 3, `unknown key "rows" in activity`, "max_rows"},
		{"unnamed server context", "servers:\n  - url: https://x/mcp\n    bogus: 1\n", 3, 5, `in servers entry 1`, "known keys"},
		{"args not a list", "servers:\n  - name: x\n    command: a\n    args: \"x\"\n", 4, 11, `server "x": args must be a list of strings, got a string`, "args: ["},
		{"args item not a string", "servers:\n  - name: x\n    command: a\n    args: [a, {b: c}]\n", 4, 15, "item 2 is a mapping", ""},
		{"disabled not a bool", "servers:\n  - name: x\n    command: a\n    disabled: yes\n", 4, 15, "disabled must be true or false", "disabled: true"},
		{"max_rows not an int", "activity:\n  max_rows: 12.5\n", 2, 13, "max_rows must be a whole number", ""},
		{"headers a list", "servers:\n  - name: x\n    url: https://x/mcp\n    headers: [a]\n", 4, 14, "headers must be a mapping", "X-Team"},
		{"header value a mapping", "servers:\n  - name: x\n    url: https://x/mcp\n    headers:\n      A: {b: c}\n", 5, 10, `value of "A" must be a string`, ""},
		{"servers a mapping", "servers:\n  docs: {}\n", 2, 7, "servers must be a list of servers", ""},
		{"server not a mapping", "servers:\n  - docs\n", 2, 5, `servers entry 1 must be a mapping`, ""},
		{"file not a mapping", "- a\n", 1, 1, "the file must be a mapping", ""},
		{"timeout without unit", "servers:\n  - name: x\n    command: a\n    timeout: 30\n", 4, 14, `invalid duration "30"`, "30s"},
		{"negative max_age", "activity:\n  max_age: -5m\n", 2, 12, "negative duration", ""},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", 3, 7, "more than one YAML document", "---"},
		{"duplicate key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n", 2, 1, `"listen" already defined`, ""},
		{"listen not loopback", "listen: 0.0.0.0:7861\n", 1, 9, "not a loopback address; proxyd only listens on loopback", DefaultListen},
		{"listen all interfaces", "listen: :7861\n", 1, 9, "not a loopback address", ""},
		{"listen not host:port", "listen: localhost\n", 1, 9, "not host:port", ""},
		{"listen bad port", "listen: 127.0.0.1:99999\n", 1, 9, "invalid port", ""},
		{"name missing", "servers:\n  - url: https://x/mcp\n", 2, 5, "servers entry 1 has no name", "name: docs"},
		{"name underscore", "servers:\n  - name: my_docs\n    url: https://x/mcp\n", 2, 11, `invalid server name "my_docs"`, "<server>__<tool>"},
		{"name upper case", "servers:\n  - name: Docs\n    url: https://x/mcp\n", 2, 11, `invalid server name "Docs"`, "lower-case"},
		{"name too long", "servers:\n  - name: " + strings.Repeat("a", 32) + "\n    url: https://x/mcp\n", 2, 11, "invalid server name", "1-31"},
		{"name duplicate", "servers:\n  - name: a\n    url: https://x/mcp\n  - name: a\n    command: x\n", 4, 11, `duplicate server name "a"`, "line 2"},
		{"url and command", "servers:\n  - name: a\n    url: https://x/mcp\n    command: npx\n", 4, 5, "has both url and command", "not both"},
		{"neither url nor command", "servers:\n  - name: a\n    protocol: auto\n", 2, 5, "has neither url nor command", "url:"},
		{"url scheme", "servers:\n  - name: a\n    url: ftp://x/mcp\n", 3, 10, "must start with http:// or https://", ""},
		{"url userinfo", "servers:\n  - name: a\n    url: https://u:hunter2@x/mcp\n", 3, 10, "must not contain user information", "oauth"},
		{"url no host", "servers:\n  - name: a\n    url: https:///mcp\n", 3, 10, "url has no host", ""},
		{"url relative", "servers:\n  - name: a\n    url: /mcp\n", 3, 10, "must start with http", ""},
		{"command blank", "servers:\n  - name: a\n    command: \" \"\n", 3, 14, "command is blank", ""},
		{"transport unknown", "servers:\n  - name: a\n    url: https://x/mcp\n    transport: websocket\n", 4, 16, `unknown transport "websocket"`, "streamable-http, sse or stdio"},
		{"transport stdio with url", "servers:\n  - name: a\n    url: https://x/mcp\n    transport: stdio\n", 4, 16, "transport stdio needs command", ""},
		{"transport sse with command", "servers:\n  - name: a\n    command: x\n    transport: sse\n", 4, 16, "transport sse needs url", ""},
		{"protocol unknown", "servers:\n  - name: a\n    url: https://x/mcp\n    protocol: v2\n", 4, 15, `unknown protocol "v2"`, "auto"},
		{"bad header reference", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      x-team: ${vault:abc}\n", 5, 7, "unknown reference", "${env:NAME}"},
		{"cookie header", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      Cookie: s=abc123\n", 5, 7, "holds a credential", "mcpx auth set-token a"},
		{"authorization header", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      authorization: Bearer abc\n", 5, 7, "header authorization holds a credential written into the config file", "${env:NAME}"},
		{"header name invalid", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      \"X Team\": a\n", 5, 7, `invalid header name "X Team"`, ""},
		{"header value CRLF", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      X-A: \"a\\r\\nb\"\n", 5, 12, "header X-A has an invalid value", "one line"},
		{"managed header", "servers:\n  - name: a\n    url: https://x/mcp\n    headers:\n      Mcp-Session-Id: x\n", 5, 7, "managed by mcpx", ""},
		{"tls without ca_file", "servers:\n  - name: a\n    url: https://x/mcp\n    tls: {}\n", 4, 10, "tls is given without ca_file", "ca_file"},
		{"tls null", "servers:\n  - name: a\n    url: https://x/mcp\n    tls:\n", 4, 5, "tls is given without ca_file", ""},
		{"oauth http endpoint", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      token_endpoint: http://auth.example.com/token\n", 5, 23, "oauth token_endpoint uses http:// on a non-loopback host", "https://"},
		{"oauth query", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      authorization_endpoint: https://a.example/auth?x=1\n", 5, 31, "must not have a query", ""},
		{"oauth fragment", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      registration_endpoint: \"https://a.example/reg#f\"\n", 5, 30, "must not have a fragment", ""},
		{"oauth userinfo", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      auth_server_metadata_url: https://u:p@a.example/m\n", 5, 33, "must not contain user information", ""},
		{"oauth whitespace", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      token_endpoint: \"https://a.example/ t\"\n", 5, 23, "contains whitespace", ""},
		{"oauth client_metadata_url", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      client_metadata_url: ftp://a.example/c\n", 5, 28, "client_metadata_url must be an https:// URL", ""},
		{"client_secret without client_id", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      client_secret: s\n", 5, 7, "client_secret is set without client_id", "client_id"},
		{"oauth scope whitespace", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      scopes: [\"read write\"]\n", 5, 16, `invalid oauth scope "read write"`, "own item"},
		{"env key invalid", "servers:\n  - name: a\n    command: x\n    env:\n      1BAD: v\n", 5, 7, `invalid environment variable name "1BAD"`, ""},
		{"env on url server", "servers:\n  - name: a\n    url: https://x/mcp\n    env: {A: b}\n", 4, 5, "env applies only to command servers", ""},
		{"args on url server", "servers:\n  - name: a\n    url: https://x/mcp\n    args: [x]\n", 4, 5, "args apply only to command servers", ""},
		{"headers on stdio server", "servers:\n  - name: a\n    command: x\n    headers: {X-A: b}\n", 4, 5, "headers applies only to url servers", ""},
		{"prefix without value", "servers:\n  - name: a\n    command: x\n    prefix:\n", 4, 5, "prefix has no value", `prefix: ""`},
		{"prefix null", "servers:\n  - name: a\n    command: x\n    prefix: ~\n", 4, 5, "prefix has no value", ""},
		{"prefix characters", "servers:\n  - name: a\n    command: x\n    prefix: \"gh/\"\n", 4, 13, `prefix "gh/" has characters tool names cannot hold`, "gh_"},
		{"prefix too long", "servers:\n  - name: a\n    command: x\n    prefix: " + strings.Repeat("p", 33) + "\n", 4, 13, "longer than 32 characters", "64"},
		{"prefix not a string", "servers:\n  - name: a\n    command: x\n    prefix: [a]\n", 4, 13, "prefix must be a string", `prefix: "gh_"`},
		{"oauth on stdio server", "servers:\n  - name: a\n    command: x\n    oauth: {client_id: c}\n", 4, 5, "oauth applies only to url servers", ""},
		{"state dsn with password", "state:\n  postgres: postgres://app:hunter2@db/mcpx\n", 2, 13, "must not contain a password", "${env:PGPASSWORD}"},
		{"state dsn password param", "state:\n  postgres: postgres://app@db/mcpx?password=hunter2\n", 2, 13, "must not contain a password", ""},
		{"state keyword dsn password", "state:\n  postgres: host=db user=app password=hunter2\n", 2, 13, "must not contain a password", ""},
		{"state unknown reference", "state:\n  postgres: ${vault:x}\n", 2, 13, "unknown reference", ""},
		{"metrics_listen not host:port", "metrics_listen: 9464\n", 1, 17, "not host:port", "127.0.0.1:9464"},
		{"state unknown key", "state:\n  mysql: x\n", 2, 3, "unknown key", ""},
		{"unknown grant", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: password}\n", 4, 20, `unknown oauth grant "password"`, "client_credentials"},
		{"client credentials inline secret", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: client_credentials, client_id: c, client_secret: hunter2}\n", 4, 69, "client_secret must be a reference", "${env:NAME}"},
		{"client credentials without credentials", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: client_credentials, client_id: c}\n", 4, 13, "needs client_secret or private_key", "private_key_jwt"},
		{"client credentials without client_id", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: client_credentials, private_key: \"${file:/k.pem}\"}\n", 4, 13, "needs client_id", ""},
		{"private key inline", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      client_id: c\n      private_key: \"-----BEGIN PRIVATE KEY-----hunter2\"\n", 6, 20, "private_key must be a reference", "${file:/path}"},
		{"secret and key", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      client_id: c\n      client_secret: \"${env:S}\"\n      private_key: \"${file:/k}\"\n", 7, 7, "both client_secret and private_key", ""},
		{"auth method mismatch", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      client_id: c\n      client_secret: \"${env:S}\"\n      token_endpoint_auth_method: private_key_jwt\n", 7, 35, "does not match the configured credentials", "private_key_jwt needs private_key"},
		{"unknown auth method", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {token_endpoint_auth_method: tls_client_auth}\n", 4, 41, `unknown token_endpoint_auth_method "tls_client_auth"`, "private_key_jwt"},
		{"jwt bearer without assertion", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: jwt_bearer}\n", 4, 13, "needs assertion", "${file:/var/run/secrets/tokens/mcp}"},
		{"assertion inline", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: jwt_bearer, assertion: eyJhunter2}\n", 4, 43, "assertion must be a reference", ""},
		{"assertion without jwt bearer", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {assertion: \"${env:T}\"}\n", 4, 13, "assertion is used only by grant: jwt_bearer", "grant: jwt_bearer"},
		{"token exchange without idp", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: token_exchange, client_id: c}\n", 4, 13, "needs identity_provider", "issuer"},
		{"token exchange idp incomplete", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      grant: token_exchange\n      client_id: c\n      identity_provider: {issuer: \"https://idp.example\", client_id: i}\n", 5, 7, "needs identity_provider.id_token", "id_token"},
		{"idp id token inline", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      grant: token_exchange\n      client_id: c\n      identity_provider: {issuer: \"https://idp.example\", client_id: i, id_token: hunter2}\n", 7, 82, "identity_provider.id_token must be a reference", "id_token: ${env:NAME}"},
		{"idp issuer http", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      grant: token_exchange\n      client_id: c\n      identity_provider: {issuer: \"http://idp.example\", client_id: i, id_token: \"${env:T}\"}\n", 7, 35, "uses http:// on a non-loopback host", ""},
		{"idp without token exchange", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      identity_provider: {issuer: \"https://idp.example\"}\n", 5, 7, "identity_provider is used only by grant: token_exchange", ""},
		{"unknown identity provider key", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      grant: token_exchange\n      identity_provider: {isuer: x}\n", 6, 27, `unknown key "isuer"`, "issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			errs := flatten(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), err)
			}
			e := errs[0]
			if e.File != "config.yaml" || e.Line != tt.line || e.Column != tt.col {
				t.Errorf("position %s:%d:%d, want config.yaml:%d:%d (%v)", e.File, e.Line, e.Column, tt.line, tt.col, e)
			}
			if !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("msg %q does not contain %q", e.Msg, tt.msg)
			}
			if !strings.Contains(e.Hint, tt.hint) {
				t.Errorf("hint %q does not contain %q", e.Hint, tt.hint)
			}
			if e.Hint == "" {
				t.Errorf("no fix in %v", e)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes a credential: %v", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := "listen: 10.0.0.1:80\nservers:\n  - name: A\n    url: https://x/mcp\n  - name: b\n"
	_, err := Parse("c.yaml", []byte(src))
	errs := flatten(t, err)
	var lines []int
	for _, e := range errs {
		lines = append(lines, e.Line)
	}
	if want := []int{1, 3, 5}; !reflect.DeepEqual(lines, want) {
		t.Errorf("error lines = %v, want %v (%v)", lines, want, err)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"empty", ""},
		{"comments only", "# nothing yet\n"},
		{"null servers", "servers:\n"},
		{"empty list", "servers: []\n"},
		{"ipv6 loopback", "listen: \"[::1]:7861\"\n"},
		{"localhost", "listen: localhost:0\n"},
		{"127/8", "listen: 127.1.2.3:80\n"},
		{"http oauth on loopback", "servers:\n  - name: a\n    url: http://127.0.0.1:9/mcp\n    oauth: {token_endpoint: \"http://localhost:8/token\", allow_missing_pkce_methods: true}\n"},
		{"days", "activity: {max_age: 7d, max_rows: 10}\n"},
		{"anchors", "servers:\n  - name: a\n    command: x\n    env: &e {A: b}\n  - name: b\n    command: y\n    env: *e\n"},
		{"numeric name", "servers:\n  - name: 123\n    command: x\n"},
		{"document marker", "---\nlisten: 127.0.0.1:1\n"},
		{"metrics_listen on all interfaces", "metrics_listen: \"0.0.0.0:9464\"\n"},
		{"state dsn", "state: {postgres: \"postgres://mcpx@db.example:5432/mcpx?sslmode=require\"}\n"},
		{"state dsn password by reference", "state: {postgres: \"postgres://mcpx:${env:PGPASSWORD}@db/mcpx\"}\n"},
		{"state dsn by file", "state: {postgres: \"${file:/run/secrets/mcpx-dsn}\"}\n"},
		{"client credentials with a secret", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: client_credentials, client_id: c, client_secret: \"${env:S}\", dpop: true}\n"},
		{"client credentials with a key", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: client_credentials, client_id: c, private_key: \"${file:/k.pem}\", token_endpoint_auth_method: private_key_jwt}\n"},
		{"jwt bearer", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {grant: jwt_bearer, client_id: w, assertion: \"${file:/var/run/secrets/tokens/mcp}\"}\n"},
		{"token exchange", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth:\n      grant: token_exchange\n      client_id: c\n      client_secret: \"${env:S}\"\n      identity_provider: {token_endpoint: \"https://idp.example/token\", client_id: i, id_token: \"${env:ID}\"}\n"},
		{"browser sign-in secret inline", "servers:\n  - name: a\n    url: https://x/mcp\n    oauth: {client_id: c, client_secret: s}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("c.yaml", []byte(tt.yaml)); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
}

func TestExposedPrefix(t *testing.T) {
	c, err := Parse("c.yaml", []byte("servers:\n  - name: a\n    command: x\n  - name: b\n    command: x\n    prefix: \"gh_\"\n  - name: c\n    command: x\n    prefix: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a__", "gh_", ""} {
		if got := c.Servers[i].ExposedPrefix(); got != want {
			t.Errorf("server %s: ExposedPrefix() = %q, want %q", c.Servers[i].Name, got, want)
		}
	}
	// An empty prefix survives a round trip through the file: it must not
	// turn back into the default.
	out, err := encodeConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("c.yaml", out)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	for i, s := range again.Servers {
		if s.ExposedPrefix() != c.Servers[i].ExposedPrefix() {
			t.Errorf("server %s: prefix %q after a round trip, want %q\n%s", s.Name, s.ExposedPrefix(), c.Servers[i].ExposedPrefix(), out)
		}
	}
}

func TestValidateEndpointURL(t *testing.T) {
	tests := []struct {
		raw string
		ok  bool
	}{
		{"https://auth.example.com/token", true},
		{"https://auth.example.com:8443/t", true},
		{"http://127.0.0.1:9000/token", true},
		{"http://localhost/token", true},
		{"http://[::1]:80/token", true},
		{"http://auth.example.com/token", false},
		{"http://169.254.169.254/token", false},
		{"https://auth.example.com/token?x=1", false},
		{"https://auth.example.com/token?", false},
		{"https://auth.example.com/token#f", false},
		{"https://auth.example.com/token#", false},
		{"https://user@auth.example.com/token", false},
		{"https:// auth.example.com/token", false},
		{"https://auth.example.com/to ken", false},
		{"https://auth.example.com/token\n", false},
		{"ftp://auth.example.com/token", false},
		{"auth.example.com/token", false},
		{"https:///token", false},
		{"https:opaque", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			err := ValidateEndpointURL("token_endpoint", tt.raw)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateEndpointURL(%q) = %v, want ok=%v", tt.raw, err, tt.ok)
			}
			if err != nil {
				var ce *Error
				if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "token_endpoint") || ce.Hint == "" {
					t.Errorf("error %v does not name the field with a fix", err)
				}
			}
		})
	}
}

func TestValidateWithoutFile(t *testing.T) {
	c := &Config{Servers: []Server{{Name: "a"}, {Name: "b", Command: "x"}}}
	err := c.Validate()
	errs := flatten(t, err)
	if len(errs) != 1 || errs[0].Line != 0 || errs[0].File != "" {
		t.Fatalf("Validate = %v", err)
	}
	if got, want := errs[0].Error(), `server "a" has neither url nor command; fix: `; !strings.HasPrefix(got, want) {
		t.Errorf("Error() = %q, want prefix %q", got, want)
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Errorf("empty config: %v", err)
	}
}

func TestValidateAfterReorder(t *testing.T) {
	c, err := Parse("c.yaml", []byte("servers:\n  - name: a\n    command: x\n  - name: b\n    command: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Positions belong to the parsed order; a moved server loses them
	// rather than pointing at another server's lines.
	c.Servers[0], c.Servers[1] = c.Servers[1], c.Servers[0]
	c.Servers[0].Transport = "bogus"
	e := flatten(t, c.Validate())
	if len(e) != 1 || e[0].Line != 0 || e[0].File != "c.yaml" {
		t.Errorf("Validate = %v", e)
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "config.yaml", Line: 7, Column: 5, Msg: `unknown key "hedaers" in server "docs"`, Hint: `did you mean "headers"?`},
			`config.yaml:7:5: unknown key "hedaers" in server "docs"; fix: did you mean "headers"?`},
		{Error{File: "c.yaml", Msg: "m"}, "c.yaml: m"},
		{Error{Line: 2, Column: 3, Msg: "m", Hint: "h"}, "2:3: m; fix: h"},
		{Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file is the default", func(t *testing.T) {
		c, err := Load(filepath.Join(dir, "nope", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if c.ListenAddr() != DefaultListen || len(c.Servers) != 0 || c.Activity.MaxRows != DefaultActivityMaxRows || time.Duration(c.Activity.MaxAge) != DefaultActivityMaxAge {
			t.Errorf("default = %+v", c)
		}
	})
	t.Run("file errors carry the path", func(t *testing.T) {
		p := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(p, []byte("listen: 8.8.8.8:53\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.HasPrefix(err.Error(), p+":1:9: ") {
			t.Errorf("Load = %v", err)
		}
	})
	t.Run("unreadable path", func(t *testing.T) {
		if _, err := Load(dir); err == nil {
			t.Error("Load(directory) succeeded")
		}
	})
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	if got := DefaultPath(); got != "/xdg/mcpx/config.yaml" {
		t.Errorf("with XDG_CONFIG_HOME: %q", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultPath(); got != "/home/u/.config/mcpx/config.yaml" {
		t.Errorf("without XDG_CONFIG_HOME: %q", got)
	}
}

func TestDurationRoundTrip(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"30s", 30 * time.Second, "30s"},
		{"1h", time.Hour, "1h"},
		{"720h", 720 * time.Hour, "720h"},
		{"30d", 720 * time.Hour, "720h"},
		{"90m", 90 * time.Minute, "1h30m"},
		{"1h0m30s", time.Hour + 30*time.Second, "1h0m30s"},
		{"1.5s", 1500 * time.Millisecond, "1.5s"},
		{"250ms", 250 * time.Millisecond, "250ms"},
		{"0s", 0, "0s"},
	}
	type doc struct {
		D Duration `yaml:"d" json:"d"`
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var d doc
			if err := yaml.Unmarshal([]byte("d: "+tt.in+"\n"), &d); err != nil {
				t.Fatal(err)
			}
			if time.Duration(d.D) != tt.want {
				t.Fatalf("decoded %v, want %v", time.Duration(d.D), tt.want)
			}
			b, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != "d: "+tt.out {
				t.Errorf("yaml = %q, want %q", got, "d: "+tt.out)
			}
			var back doc
			if err := yaml.Unmarshal(b, &back); err != nil || back != d {
				t.Errorf("yaml round trip = %v, %v", back, err)
			}
			j, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(j, &back); err != nil || back != d {
				t.Errorf("json round trip %s = %v, %v", j, back, err)
			}
		})
	}
	for _, bad := range []string{"", "30", "-1s", "1y", "d", "-3d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) succeeded", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(issueExample))
	f.Add([]byte("listen: [\n"))
	f.Add([]byte("servers:\n  - name: a\n    command: x\n    env: &e {A: b}\n  - name: b\n    command: y\n    env: *e\n"))
	f.Add([]byte("servers: [{name: a, url: \"https://x/mcp\", headers: {A: b}}]\n---\nx: 1\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("servers:\n- <<: {name: a}\n  command: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config fails Validate: %v", err)
		}
	})
}

func TestWarnings(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "servers:\n" +
		"  - name: a\n    url: https://x/mcp\n    tls: {ca_file: " + ca + "}\n" +
		"  - name: b\n    url: https://x/mcp\n    tls: {ca_file: " + filepath.Join(dir, "missing.pem") + "}\n" +
		"  - name: c\n    url: http://example.com/mcp\n" +
		"  - name: d\n    url: http://127.0.0.1:9/mcp\n" +
		"  - name: e\n    url: http://example.com/mcp\n    disabled: true\n"
	c, err := Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Warnings()
	if len(ws) != 2 {
		t.Fatalf("Warnings = %v", ws)
	}
	if ws[0].Line != 7 || ws[0].Column != 20 || !strings.Contains(ws[0].Msg, `server "b": cannot read ca_file`) {
		t.Errorf("ca warning = %v", ws[0])
	}
	if ws[1].Line != 9 || ws[1].Column != 10 || !strings.Contains(ws[1].Msg, "plain http://") {
		t.Errorf("http warning = %v", ws[1])
	}
}

// The reference's example file must stay valid.
func TestReadmeExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, _ := strings.Cut(string(b), "## Configuration reference")
	_, rest, ok := strings.Cut(ref, "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml example in the README's configuration reference")
	}
	c, err := Parse("README.md", []byte(example))
	if err != nil {
		t.Fatalf("example does not parse: %v", err)
	}
	if len(c.Servers) != 3 || time.Duration(c.Activity.MaxAge) != 30*24*time.Hour {
		t.Errorf("example parsed as %+v", c)
	}
}

func TestServerTarget(t *testing.T) {
	tests := []struct {
		s    Server
		want string
	}{
		{Server{URL: "https://example.test/mcp"}, "https://example.test/mcp"},
		{Server{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}}, "npx -y @modelcontextprotocol/server-everything"},
		{Server{Command: "sh", Args: []string{"-c", "echo hello; sleep 30"}}, "sh -c 'echo hello; sleep 30'"},
		{Server{Command: "/opt/my server/run", Args: []string{"it's", ""}}, `'/opt/my server/run' 'it'\''s' ''`},
	}
	for _, tt := range tests {
		if got := tt.s.Target(); got != tt.want {
			t.Errorf("Target of %+v = %q, want %q", tt.s, got, tt.want)
		}
	}
	// Credentials in a URL stay masked.
	s := Server{URL: "https://user:hunter2-canary@example.test/mcp"}
	if got := s.Target(); strings.Contains(got, "hunter2-canary") {
		t.Errorf("Target shows the password: %q", got)
	}
}
