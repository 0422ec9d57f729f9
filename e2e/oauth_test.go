package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // reads proxyd's state DB for the canary tokens

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// TestOAuthFixture signs in to an MCP server protected by the fixture
// authorization server, in both protocol eras, and walks the user's path:
// login, a call, auth status, the refresh drill, logout, and a call that
// is then refused as an auth failure.
func TestOAuthFixture(t *testing.T) {
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			fx := startAuthFixture(t, "--era", era)
			o := newOAuthEnv(t)
			o.writeConfig(oauthConfig("docs", fx.MCP, ""))
			o.up()

			// Before any sign-in the refresh drill sends the user to login.
			if r := o.run("drill", "refresh", "docs"); r.code != 6 || !strings.Contains(r.stderr, "run 'mcpx login docs' first") {
				t.Errorf("drill refresh before a sign-in: want exit 6 naming login\n%s", r)
			}
			r := o.mustRun("login", "docs")
			for _, want := range []string{"Signed in to docs.", "scopes:", "expires:", "refresh token: yes", "(registered)"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("login output lacks %q:\n%s", want, r)
				}
			}
			if !strings.Contains(r.stderr, "Opened your browser") {
				t.Errorf("login did not say it opened the browser:\n%s", r)
			}

			// A second sign-in reuses the registration.
			var lr api.LoginResult
			o.runJSON(0, &lr, "login", "docs")
			if !lr.RefreshToken || lr.ClientSource != "registered" || lr.NewRegistration || lr.ClientID == "" {
				t.Errorf("second login = %+v, want a refresh token and the stored registration", lr)
			}
			if time.Until(lr.Expiry) < 30*time.Minute {
				t.Errorf("expiry %s: want about an hour ahead", lr.Expiry)
			}
			if st := fx.stats(t); st.Registrations != 1 || st.CodeExchanges != 2 {
				t.Errorf("fixture stats after two sign-ins = %+v, want 1 registration and 2 code exchanges", st)
			}
			// login returns once proxyd has reconnected with the token and
			// listed the tools: a call right after it needs no waiting.
			if lr.Connection == nil || lr.Connection.State != api.StateReady || lr.Connection.Tools == 0 || lr.Connection.Error != "" {
				t.Errorf("login's connection = %+v, want ready with tools", lr.Connection)
			}
			r = o.mustRun("call", "docs", "echo", "text=hello-oauth")
			if !strings.Contains(r.stdout, "hello-oauth") {
				t.Errorf("call output lacks the echo:\n%s", r)
			}

			var as []api.AuthStatus
			o.runJSON(0, &as, "auth", "status")
			if len(as) != 1 || !as[0].SignedIn || !as[0].RefreshToken || as[0].Expiry == nil || as[0].NextProactive == nil || as[0].Latched != "" {
				t.Errorf("auth status = %+v", as)
			}

			before := fx.stats(t)
			var rep api.RefreshDrillReport
			o.runJSON(0, &rep, "drill", "refresh", "docs", "--callers", "50")
			if rep.Callers != 50 || rep.TokenRequests != 1 || rep.Succeeded != 50 || rep.Failed != 0 || !rep.GrantIntact || rep.Verdict != api.VerdictPass {
				t.Errorf("drill report = %+v", rep)
			}
			after := fx.stats(t)
			// The drill's own refresh plus its follow-up check.
			if got := after.RefreshRequests - before.RefreshRequests; got != 2 {
				t.Errorf("the fixture saw %d refresh requests during the drill, want 2 (one per expiry)", got)
			}
			if after.ReuseDetected != 0 || after.RevokedGrants != 0 {
				t.Errorf("grant burned by the drill: %+v", after)
			}

			// With the token endpoint holding each response 50 ms the
			// callers surely overlap the flight; the table form shows
			// progress and the verdict.
			if code, err := httpPost(fx.AS + "/_fixture/hold?ms=50"); err != nil || code != 204 {
				t.Fatalf("holding token responses: %d %v", code, err)
			}
			r = o.mustRun("drill", "refresh", "docs", "--callers", "50")
			if !strings.Contains(r.stdout, "verdict: PASS") || !strings.Contains(r.stdout, "token requests: 1 ") || !strings.Contains(r.stderr, "firing 50 concurrent") {
				t.Errorf("drill with a slow token endpoint:\n%s", r)
			}
			if st := fx.stats(t); st.ReuseDetected != 0 || st.RevokedGrants != 0 {
				t.Errorf("grant burned by the drill: %+v", st)
			}

			var lo api.LogoutResult
			o.runJSON(0, &lo, "logout", "docs")
			if !lo.Removed || !lo.Revoked {
				t.Errorf("logout = %+v, want tokens removed and the grant revoked", lo)
			}
			if st := fx.stats(t); st.RevokedGrants != 1 {
				t.Errorf("fixture stats after logout = %+v, want 1 revoked grant", st)
			}
			as = nil
			o.runJSON(0, &as, "auth", "status", "docs")
			if len(as) != 1 || as[0].SignedIn {
				t.Errorf("auth status after logout = %+v", as)
			}

			var cr api.CallResponse
			o.runJSON(6, &cr, "call", "docs", "echo", "text=after-logout")
			if cr.Error == nil || cr.Error.ErrorClass != "auth" {
				t.Errorf("call after logout: want error_class auth, got %+v", cr.Error)
			}
			// Signed out, the server is not ready, and 'mcpx tools' says
			// its tools (listed before) are not served, as clients see.
			st := o.waitServer("docs", api.StateError)
			var tools []api.Tool
			o.runJSON(9, &tools, "tools", "docs") // 9: nothing of it is served
			for _, tl := range tools {
				if !strings.Contains(tl.LeftOut, "not served while docs is in error") {
					t.Errorf("tool %s of a server in state %s: left_out %q", tl.Name, st.State, tl.LeftOut)
				}
			}
			if len(tools) == 0 {
				t.Error("mcpx tools after logout lists nothing: want the tools listed before, marked not served")
			}
		})
	}
}

// TestOAuthNoRefreshTokens: an authorization server that issues no
// refresh tokens earns a warning at sign-in, and the drill explains why it
// cannot run.
func TestOAuthNoRefreshTokens(t *testing.T) {
	t.Parallel()
	fx := startAuthFixture(t, "--no-refresh-tokens")
	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("docs", fx.MCP, ""))
	o.up()
	r := o.mustRun("login", "docs")
	if !strings.Contains(r.stdout, "refresh token: no") || !strings.Contains(r.stderr, "warning: no refresh token was issued") {
		t.Errorf("login did not warn about the missing refresh token:\n%s", r)
	}
	o.waitReady("docs")
	o.mustRun("call", "docs", "echo", "text=x")
	r = o.run("drill", "refresh", "docs", "--callers", "5")
	if r.code != 9 || !strings.Contains(r.stderr, "no refresh token") {
		t.Errorf("drill without a refresh token: want a failure that says why:\n%s", r)
	}
	if st := fx.stats(t); st.RefreshRequests != 0 {
		t.Errorf("the drill sent %d refresh requests", st.RefreshRequests)
	}
}

// TestOAuthCanary: the tokens and the client secret never appear in CLI
// output, proxyd.log, activity or metrics.
func TestOAuthCanary(t *testing.T) {
	t.Parallel()
	secret := "canary-secret-" + randHex(t, 16)
	// In process: the client is registered with proxyd's loopback
	// callback, which the fixture program's --client does not do.
	fx := startAuthFixtureInProcess(t, "canary-client", secret)
	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("docs", fx.MCP, fmt.Sprintf("    oauth:\n      client_id: canary-client\n      client_secret: %s\n", secret)))
	o.up()
	o.mustRun("login", "docs")
	o.waitReady("docs")
	secrets := map[string]bool{secret: true}
	collect := func() {
		for _, s := range storedTokens(t, o.StateDir) {
			secrets[s] = true
		}
	}
	collect()
	o.mustRun("call", "docs", "echo", "text=x")
	o.mustRun("drill", "refresh", "docs", "--callers", "20")
	collect() // rotated by the drill
	// A refresh failure's message goes through the logs and status too.
	failRefresh(t, fx, "invalid_grant")
	o.run("drill", "refresh", "docs", "--callers", "5")
	o.mustRun("auth", "status")
	o.mustRun("auth", "status", "-o", "json")
	o.mustRun("status", "-o", "json")
	o.mustRun("servers", "-o", "json")
	o.run("probe", "docs", "-o", "json")
	o.run("call", "docs", "echo", "text=y")
	activity := o.mustRun("activity", "-o", "json").stdout
	metrics := o.metrics()
	o.run("logout", "docs")
	log := o.proxydLog()
	if len(secrets) < 3 {
		t.Fatalf("only %d canaries collected: want the secret, an access and a refresh token", len(secrets))
	}
	where := map[string]string{"proxyd.log": log, "activity": activity, "metrics": metrics}
	for i, out := range o.outputs {
		where[fmt.Sprintf("CLI output #%d", i)] = out
	}
	for s := range secrets {
		for name, text := range where {
			for _, form := range []string{s, url.QueryEscape(s)} {
				if strings.Contains(text, form) {
					t.Errorf("a credential (%d chars) appears in %s", len(s), name)
				}
			}
		}
	}
	t.Logf("checked %d credentials against %d outputs", len(secrets), len(where))
	if !strings.Contains(metrics, "refresh") {
		t.Errorf("metrics carry no refresh counters:\n%s", metrics)
	}
}

// storedTokens reads every access and refresh token in proxyd's state DB.
func storedTokens(t *testing.T, stateDir string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(stateDir, "state.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatalf("opening the state DB: %v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT access_token, refresh_token FROM oauth_tokens`)
	if err != nil {
		t.Fatalf("reading tokens: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var at, rt string
		if err := rows.Scan(&at, &rt); err != nil {
			t.Fatalf("reading tokens: %v", err)
		}
		for _, s := range []string{at, rt} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading tokens: %v", err)
	}
	if len(out) == 0 {
		t.Fatal("no tokens in the state DB")
	}
	return out
}

// failRefresh makes the fixture answer the next token request with kind.
func failRefresh(t *testing.T, fx authFixture, kind string) {
	t.Helper()
	resp, err := httpPost(fx.AS + "/_fixture/fail?kind=" + url.QueryEscape(kind) + "&n=1")
	if err != nil {
		t.Fatalf("injecting %s: %v", kind, err)
	}
	if resp != 204 {
		t.Fatalf("injecting %s: HTTP %d", kind, resp)
	}
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestOAuthRefreshFailures: a refresh the authorization server refuses is
// classified, shown by auth status and counted in the metrics; a terminal
// one latches, fails calls as auth errors that say how to recover, and a
// new sign-in clears it.
func TestOAuthRefreshFailures(t *testing.T) {
	for _, tc := range []struct {
		kind, outcome, class string
		terminal             bool
	}{
		{"invalid_grant", "failed_invalid_grant", "terminal", true},
		{"invalid_client", "failed_invalid_client", "terminal", true},
		{"invalid_scope", "failed_invalid_scope", "terminal", true},
		{"unsupported_grant_type", "failed_unsupported_grant_type", "terminal", true},
		{"temporarily_unavailable", "failed_temporarily_unavailable", "transient", false},
		{"server_error", "failed_server_error", "transient", false},
		{"rate_limited", "failed_rate_limited", "transient", false},
		{"non_json", "failed_server_error", "transient", false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			fx := startAuthFixture(t)
			o := newOAuthEnv(t)
			o.writeConfig(oauthConfig("docs", fx.MCP, ""))
			o.up()
			o.mustRun("login", "docs")
			o.waitReady("docs")
			failRefresh(t, fx, tc.kind)

			var rep api.RefreshDrillReport
			o.runJSON(5, &rep, "drill", "refresh", "docs", "--callers", "5")
			if rep.Verdict != api.VerdictFail || rep.TokenRequests != 1 || rep.GrantIntact {
				t.Errorf("drill report = %+v, want FAIL after one token request", rep)
			}
			var as []api.AuthStatus
			o.runJSON(0, &as, "auth", "status", "docs")
			if len(as) != 1 {
				t.Fatalf("auth status = %+v", as)
			}
			st := as[0]
			if st.LastOutcome != tc.outcome || st.LastClass != tc.class || (st.Latched != "") != tc.terminal || (st.CooldownUntil != nil) == tc.terminal {
				t.Errorf("auth status = %+v, want outcome %s, class %s", st, tc.outcome, tc.class)
			}
			if m := o.metrics(); !strings.Contains(m, `mcpx_oauth_refresh_total{outcome="`+tc.outcome+`"} 1`) {
				t.Errorf("metrics lack one %s refresh:\n%s", tc.outcome, m)
			}
			if !tc.terminal {
				return
			}
			var cr api.CallResponse
			o.runJSON(6, &cr, "call", "docs", "echo", "text=x")
			if cr.Error == nil || cr.Error.ErrorClass != "auth" || !strings.Contains(cr.Error.Reason, "mcpx login docs") {
				t.Errorf("call with a latched grant: want error_class auth naming the fix, got %+v", cr.Error)
			}
			if strings.Contains(cr.Error.Message, "[REDACTED]") {
				t.Errorf("the error message lost its text to the redactor: %q", cr.Error.Message)
			}
			o.mustRun("login", "docs")
			as = nil // decode afresh: omitted fields must not keep old values
			o.runJSON(0, &as, "auth", "status", "docs")
			if len(as) != 1 || as[0].Latched != "" || as[0].LastOutcome != "" {
				t.Errorf("latch survived a new sign-in: %+v", as[0])
			}
			o.waitReady("docs")
			o.mustRun("call", "docs", "echo", "text=after-relogin")
		})
	}
}

// TestOAuthLoginBrowserFails: a $BROWSER that fails is named, the URL
// is printed all the same, and the wait ends at --timeout saying how to
// go on.
func TestOAuthLoginBrowserFails(t *testing.T) {
	t.Parallel()
	fx := startAuthFixture(t)
	o := newOAuthEnv(t)
	o.extraEnv = append(o.extraEnv, "BROWSER=false") // the last BROWSER wins
	o.writeConfig(oauthConfig("docs", fx.MCP, ""))
	o.up()
	r := o.run("login", "docs", "--timeout", "3s")
	for _, want := range []string{"The browser command failed (exit status 1)", "response_type=code", "no sign-in was completed in the browser in time"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("login with a failing $BROWSER: stderr lacks %q\n%s", want, r)
		}
	}
	if r.code != 6 {
		t.Errorf("login with a failing $BROWSER: want exit 6\n%s", r)
	}
}

// TestOAuthLoginNoBrowser: with --no-browser the authorization URL is
// printed on its own line; opening it anywhere completes the sign-in.
func TestOAuthLoginNoBrowser(t *testing.T) {
	t.Parallel()
	fx := startAuthFixture(t)
	o := newOAuthEnv(t)
	o.writeConfig(oauthConfig("docs", fx.MCP, ""))
	o.up()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcpxBin, append(o.globals(), "login", "docs", "--no-browser")...)
	cmd.Env = o.environ() // no BROWSER
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	opened := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if !opened && (strings.HasPrefix(line, "http://") || strings.HasPrefix(line, "https://")) {
			opened = true
			u, err := url.Parse(line)
			if err != nil || u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("resource") == "" || u.Query().Get("state") == "" {
				t.Errorf("authorization URL lacks PKCE, resource or state: %q (%v)", line, err)
			}
			resp, err := http.Get(line) // the fixture approves and redirects to proxyd's callback
			if err != nil {
				t.Fatalf("opening the authorization URL: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the callback page answered HTTP %d", resp.StatusCode)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcpx login --no-browser: %v\nstderr:\n%s\nstdout:\n%s", err, strings.Join(lines, "\n"), stdout.String())
	}
	if !opened {
		t.Fatalf("no URL line in the output:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.Contains(stdout.String(), "Signed in to docs.") {
		t.Errorf("login output:\n%s", stdout.String())
	}
}
