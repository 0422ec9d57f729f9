package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var loginCommand = &cli.Command{
	Name:      "login",
	Usage:     "sign in to a server with OAuth; proxyd keeps the tokens fresh",
	ArgsUsage: "SERVER",
	Description: `Signs in to SERVER through proxyd: OAuth discovery (RFC 9728, RFC 8414),
dynamic client registration when no client id is configured (RFC 7591,
kept for later sign-ins), the authorization code flow with PKCE S256, the
resource indicator (RFC 8707) and the issuer check (RFC 9207). proxyd
listens for the browser's redirect on loopback; this command opens the
browser ($BROWSER if set) and waits until the code is exchanged, then
prints the granted scopes, the expiry and whether a refresh token was
issued. proxyd refreshes the token before it expires, one refresh per
grant however many calls are waiting.

The command returns once proxyd has reconnected the server with the new
token and listed its tools, so 'mcpx login X && mcpx call X ...' never
races the reconnection; when the server does not connect (say, it
refuses the granted scopes) it exits 1 saying why.

With --no-browser the authorization URL is printed on its own line to
open anywhere (the redirect still goes to this machine's loopback).

Examples:
   mcpx login docs
   mcpx login docs --no-browser
   BROWSER=firefox mcpx login docs`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.BoolFlag{Name: "no-browser", Usage: "print the authorization URL instead of opening a browser"},
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Value: 5 * time.Minute, Usage: "wait up to `DURATION` for the browser sign-in"},
		&cli.BoolFlag{Name: "force", Usage: "sign in even when the server answers without a sign-in"},
	},
	BashComplete: completeServers,
	Action:       runLogin,
}

var logoutCommand = &cli.Command{
	Name:      "logout",
	Usage:     "remove a server's tokens and revoke the grant where supported",
	ArgsUsage: "SERVER",
	Description: `Deletes SERVER's tokens from proxyd's store and, when the authorization
server has a revocation endpoint (RFC 7009), revokes the grant there.
The client registration is kept for the next sign-in.

Examples:
   mcpx logout docs`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runLogout,
}

var authCommand = &cli.Command{
	Name:  "auth",
	Usage: "sign-in state of servers",
	Subcommands: []*cli.Command{{
		Name:      "status",
		Usage:     "per server: signed in, grant, token binding, issuer, expiry, refresh token, scopes, last refresh",
		ArgsUsage: "[SERVER]",
		Description: `Shows, for every HTTP server (or one), whether proxyd holds a grant, how
it obtains tokens (authorization_code, client_credentials, jwt_bearer or
token_exchange, with the identity token's source), how the token is
presented (Bearer, or DPoP bound to the grant's key), the authorization
server issuer the credentials are keyed by, when the access token expires
and when the next proactive refresh (or, for a grant without a browser,
the next token request) runs, whether a refresh token exists, the
scopes, the last refresh's outcome and class (transient or terminal) and
a latched terminal failure (sign in again).

Examples:
   mcpx auth status
   mcpx auth status docs -o json`,
		Flags:        []cli.Flag{outputFlag},
		BashComplete: completeServers,
		Action:       runAuthStatus,
	}, authSetTokenCommand},
}

func runLogin(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("login needs one SERVER")
	}
	f, err := format(c)
	if err != nil {
		return err
	}
	server := c.Args().First()
	if done, err := noSignInNeeded(c, server); done || err != nil {
		return err
	}
	cl := newClient(c)
	req := api.LoginRequest{Server: server, TimeoutMS: c.Duration("timeout").Milliseconds()}
	var result *api.LoginResult
	var failure *api.ErrorDetail
	st, err := cl.Login(c.Context, req)
	if err != nil {
		return daemonErr(err)
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return daemonErr(err)
		}
		switch ev.Type {
		case api.LoginEventAuthorize:
			openAuthURL(c, server, ev.URL)
		case api.LoginEventResult:
			result = ev.Result
		case api.LoginEventError:
			failure = ev.Error
		}
	}
	if failure != nil {
		return exitErr(ExitAuthRequired, errors.New(failure.Message))
	}
	if result == nil {
		return errors.New("proxyd ended the sign-in without a result; see its log")
	}
	for _, w := range result.Warnings {
		errorf(c, "warning: %s\n", redact.Control(w))
	}
	if f != "table" {
		if err := render(c, result, nil); err != nil {
			return err
		}
		return notConnected(result)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Signed in to %s.\n", result.Server)
	fmt.Fprintf(w, "  scopes:        %s\n", shown(orNoneText(strings.Join(result.Scopes, " "))))
	if !result.Expiry.IsZero() {
		fmt.Fprintf(w, "  expires:       %s (in %s)\n", tableTime(result.Expiry), humanDuration(time.Until(result.Expiry)))
	}
	fmt.Fprintf(w, "  refresh token: %s\n", yesNo(result.RefreshToken))
	fmt.Fprintf(w, "  client:        %s (%s)\n", shown(result.ClientID), result.ClientSource)
	if cn := result.Connection; cn != nil && cn.Error == "" {
		fmt.Fprintf(w, "  server:        %s, %d tools\n", cn.State, cn.Tools)
	}
	return notConnected(result)
}

// notConnected fails a sign-in after which proxyd could not connect the
// server, so that `mcpx login X && mcpx call X ...` stops there.
func notConnected(r *api.LoginResult) error {
	if r.Connection == nil || r.Connection.Error == "" {
		return nil
	}
	return exitErr(ExitFailure, fmt.Errorf("signed in to %s, but the server did not connect: %s (see 'mcpx status %s')",
		r.Server, redact.Control(r.Connection.Error), r.Server))
}

func orNoneText(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// openAuthURL opens the browser on the authorization URL, or prints it.
func openAuthURL(c *cli.Context, server, u string) {
	if !c.Bool("no-browser") {
		failed := func(err error) {
			errorf(c, "The browser command failed (%v): open the URL above in a browser to sign in to %s.\n", err, server)
		}
		if err := openBrowser(u, failed); err == nil {
			// The URL too: a browser that opens nothing (a wrong $BROWSER,
			// a remote shell) leaves the user a way on.
			errorf(c, "Opened your browser to sign in to %s (or open this URL):\n", server)
			fmt.Fprintln(c.App.ErrWriter, u)
			errorf(c, "Waiting for the sign-in to finish...\n")
			return
		}
	}
	errorf(c, "Open this URL in a browser to sign in to %s:\n", server)
	fmt.Fprintln(c.App.ErrWriter, u)
	errorf(c, "Waiting for the sign-in to finish...\n")
}

// openBrowser runs $BROWSER (a command; the URL is its last argument), else
// the platform's opener. A $BROWSER command that then fails is told to
// failed (it may run as long as the browser does, so it is not waited for).
func openBrowser(u string, failed func(error)) error {
	if b := strings.TrimSpace(os.Getenv("BROWSER")); b != "" {
		cmd := exec.Command("sh", "-c", b+` "$1"`, "mcpx-browser", u)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() {
			if err := cmd.Wait(); err != nil {
				failed(err)
			}
		}()
		return nil
	}
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	if _, err := exec.LookPath(opener); err != nil {
		return err
	}
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display")
	}
	cmd := exec.Command(opener, u)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

func runLogout(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("logout needs one SERVER")
	}
	if _, err := format(c); err != nil {
		return err
	}
	res, err := newClient(c).Logout(c.Context, c.Args().First())
	if err != nil {
		return daemonErr(err)
	}
	return render(c, res, func(w io.Writer) error {
		if !res.Removed {
			fmt.Fprintf(w, "Not signed in to %s; nothing to remove.\n", res.Server)
			return nil
		}
		fmt.Fprintf(w, "Signed out of %s: tokens removed.\n", res.Server)
		if res.Revoked {
			fmt.Fprintln(w, "The authorization server revoked the grant.")
		} else if res.RevokeError != "" {
			fmt.Fprintf(w, "Not revoked at the authorization server: %s\n", redact.Control(res.RevokeError))
		}
		return nil
	})
}

func runAuthStatus(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	out, err := newClient(c).AuthStatus(c.Context, c.Args().First())
	if err != nil {
		err = fromRecord(c, err, func(r *proxyd.Record) (err error) {
			out, err = r.AuthStatus(c.Context, c.Args().First())
			return err
		})
	}
	if err != nil {
		return err
	}
	// Suggest a sign-in only where the connection asks for one.
	states := map[string]api.ServerStatus{}
	if st, err := newClient(c).Status(c.Context); err == nil {
		for _, s := range st.Servers {
			states[s.Name] = s
		}
	}
	return render(c, out, func(w io.Writer) error {
		if len(out) == 0 {
			emptyNote(w, "No HTTP servers configured.")
			return nil
		}
		t := newTable(w, "SERVER", "SIGNED IN", "GRANT", "TOKEN", "ISSUER", "EXPIRES", "REFRESH TOKEN", "SCOPES", "LAST REFRESH", "NEXT REFRESH", "NOTE")
		for _, s := range out {
			expires, last, next := "-", "-", "-"
			if s.Expiry != nil {
				expires = relTime(*s.Expiry)
			}
			if s.LastRefresh != nil {
				last = relTime(*s.LastRefresh) + " " + dash(s.LastOutcome)
			}
			if s.NextProactive != nil {
				next = relTime(*s.NextProactive)
			}
			note := ""
			switch {
			case s.Latched != "":
				note = "sign in again: " + s.Latched
			case s.LastClass == "transient" && s.LastError != "":
				note = "retrying: " + s.LastError
			case !s.SignedIn:
				note = signInNote(s.Server, states)
			}
			grant := s.Grant
			if s.IdentitySource != "" {
				grant += " (" + s.IdentitySource + ")"
			}
			_ = t.Append([]string{s.Server, yesNo(s.SignedIn), grant, dash(s.Binding), dash(s.Issuer), expires, yesNo(s.RefreshToken), dash(strings.Join(s.Scopes, " ")), last, next, t.Fit(note, 60, fitCause)})
		}
		return t.Render()
	})
}

// relTime is "in 5m" or "3m ago".
func relTime(t time.Time) string {
	d := time.Until(t)
	if d >= 0 {
		return "in " + humanDuration(d)
	}
	return humanDuration(-d) + " ago"
}
