package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

var serversCommand = &cli.Command{
	Name:  "servers",
	Usage: "list, add and remove upstream servers",
	Description: `Edits the config file safely (atomic write, comments kept) and tells a
running proxyd to pick the change up. Without a subcommand, lists the
servers.

Examples:
   mcpx servers
   mcpx servers add docs https://example.com/mcp --header X-Team:infra
   mcpx servers add everything -- npx -y @modelcontextprotocol/server-everything
   mcpx servers remove docs`,
	Flags:  []cli.Flag{outputFlag},
	Action: runServersList,
	Subcommands: []*cli.Command{
		{
			Name:   "list",
			Usage:  "list configured servers and their state",
			Flags:  []cli.Flag{outputFlag},
			Action: runServersList,
		},
		{
			Name:      "add",
			Usage:     "add a server to the config",
			ArgsUsage: "NAME URL | NAME -- COMMAND [ARGS...]",
			Description: `Adds a server. With a URL it is a Streamable HTTP server (or SSE with
--transport sse); with "-- COMMAND ARGS" a stdio server that proxyd
launches with only the environment you give it (--env) plus PATH, HOME,
USER, LOGNAME, the locale (LANG, LC_ALL, TZ), TMPDIR, SHELL and TERM.

Examples:
   mcpx servers add docs https://example.com/mcp
   mcpx servers add github https://api.example.com/mcp --prefix gh_
   mcpx servers add legacy https://old.example.com/sse --transport sse
   mcpx servers add local --env LOG_LEVEL=warn -- npx -y @modelcontextprotocol/server-everything`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "transport", Usage: "`TRANSPORT`: streamable-http, sse or stdio", DefaultText: "from the URL or command"},
				&cli.StringFlag{Name: "protocol", Usage: "`PROTOCOL`: auto, legacy or modern", DefaultText: "auto"},
				&cli.StringFlag{Name: "prefix", Usage: "put `PREFIX` before the server's tool and prompt names (default NAME__; \"\" for none)"},
				&cli.StringSliceFlag{Name: "header", Aliases: []string{"H"}, Usage: "HTTP header `K:V` sent upstream (repeatable)"},
				&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "environment `K=V` for a stdio server (repeatable)"},
				&cli.StringFlag{Name: "ca-file", Usage: "extra CA bundle `FILE` for the server's TLS"},
				&cli.BoolFlag{Name: "disabled", Usage: "add it disabled"},
			},
			Action: runServersAdd,
		},
		{
			Name:         "remove",
			Aliases:      []string{"rm"},
			Usage:        "remove a server from the config",
			ArgsUsage:    "NAME",
			Action:       runServersRemove,
			BashComplete: completeServers,
		},
	},
}

func runServersList(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErr("unknown servers subcommand %q (list, add, remove)", c.Args().First())
	}
	if _, err := format(c); err != nil {
		return err
	}
	st, err := newClient(c).Status(c.Context)
	if err == nil {
		if c.IsSet("config") {
			warnOtherConfig(c, st)
		}
		if st.ConfigError != "" {
			// The list is the running configuration's, not the file's
			// as it now reads: say why they differ.
			errorf(c, "warning: proxyd kept its running configuration: %s\n", st.ConfigError)
		}
		return render(c, st.Servers, func(w io.Writer) error {
			if len(st.Servers) == 0 {
				emptyNote(w, "No servers configured. Add one with: mcpx servers add NAME URL")
				return nil
			}
			return serverTable(w, st.Servers)
		})
	}
	if !api.IsNotRunning(err) {
		return err
	}
	// proxyd is down: show the config, and say so.
	cfg, cerr := config.Load(configPath(c))
	if cerr != nil {
		return exitErr(ExitConfig, cerr)
	}
	errorf(c, "proxyd is not running (start it with 'mcpx up'); showing %s\n", configPath(c))
	out := proxyd.ConfiguredServers(cfg)
	return render(c, out, func(w io.Writer) error {
		t := newTable(w, "SERVER", "TRANSPORT", "PROTOCOL", "TARGET")
		for _, s := range out {
			_ = t.Append([]string{s.Name, s.Transport, s.Protocol, s.Target})
		}
		return t.Render()
	})
}

func runServersAdd(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) < 2 {
		return usageErr("servers add needs NAME and URL, or NAME -- COMMAND [ARGS...]")
	}
	s := config.Server{Name: args[0], Transport: c.String("transport"), Protocol: c.String("protocol"), Disabled: c.Bool("disabled")}
	if c.IsSet("prefix") {
		p := c.String("prefix")
		s.Prefix = &p
	}
	switch {
	case strings.Contains(args[1], "://") && len(args) == 2:
		s.URL = args[1]
	case strings.Contains(args[1], "://"):
		// A URL is never a command: words after it are a slip (a header
		// without --header, a stray argument), not a stdio server.
		return usageErr("%q is a URL, and a remote server takes nothing after it (got %q): a header is --header 'K: V'; a stdio server is NAME -- COMMAND [ARGS...]", args[1], strings.Join(args[2:], " "))
	case len(args) == 2 && looksLikeHost(args[1]):
		return usageErr("%q has no scheme: write https://%s (or http:// on loopback); a stdio server is NAME -- COMMAND [ARGS...]", args[1], args[1])
	default:
		s.Command, s.Args = args[1], args[2:]
	}
	headers, err := parseHeaders(c.StringSlice("header"))
	if err != nil {
		return err
	}
	s.Headers = headers
	for _, e := range c.StringSlice("env") {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return usageErr("--env %q is not K=V", e)
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[k] = v
	}
	if f := c.String("ca-file"); f != "" {
		s.TLS = &config.TLS{CAFile: f}
	}
	// The new entry is the user's input: a bad one is a usage error, and
	// so is a name already taken; only a broken file is a config error.
	if err := (&config.Config{Servers: []config.Server{s}}).Validate(); err != nil {
		return usageErr("servers add %s: %v", s.Name, err)
	}
	path := configPath(c)
	if err := config.AddServer(path, s); err != nil {
		if errors.Is(err, config.ErrExists) {
			return usageErr("a server named %q already exists in %s (remove it first, or pick another NAME)", s.Name, path)
		}
		return configErr(err)
	}
	fmt.Fprintf(c.App.Writer, "added server %q to %s\n", s.Name, path)
	return tellDaemon(c)
}

func runServersRemove(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("servers remove needs exactly one NAME")
	}
	path := configPath(c)
	if err := config.RemoveServer(path, c.Args().First()); err != nil {
		if errors.Is(err, config.ErrNotFound) {
			return exitErr(ExitNotFound, fmt.Errorf("no server named %q in %s%s", c.Args().First(), path, editdistance.DidYouMean(c.Args().First(), configuredNames(path))))
		}
		return configErr(err)
	}
	fmt.Fprintf(c.App.Writer, "removed server %q from %s\n", c.Args().First(), path)
	return tellDaemon(c)
}

// tellDaemon reloads a running proxyd; a stopped one reads the file at
// start. A proxyd that reads another file would reload that one, to no
// effect: the change is not served, which is an error.
func tellDaemon(c *cli.Context) error {
	cl := newClient(c)
	st, err := cl.Status(c.Context)
	if api.IsNotRunning(err) {
		fmt.Fprintln(c.App.Writer, "proxyd is not running; the change applies when it starts ('mcpx up')")
		return nil
	}
	if err != nil {
		return err
	}
	if other, ok := otherConfig(c, st); ok {
		return fmt.Errorf("the change is in %s, but the running proxyd (pid %d) reads %s: not served; to serve this file: mcpx down && mcpx --config %s up", configPath(c), st.PID, other, configPath(c))
	}
	res, err := cl.Reload(c.Context)
	if err != nil {
		return daemonErr(err)
	}
	fmt.Fprintf(c.App.Writer, "proxyd reloaded: added [%s], removed [%s], changed [%s]\n",
		strings.Join(res.Added, ", "), strings.Join(res.Removed, ", "), strings.Join(res.Changed, ", "))
	return nil
}

// looksLikeHost: a single word that reads as host[:port][/path] rather
// than a program (no file or command of that name exists).
func looksLikeHost(s string) bool {
	if strings.ContainsAny(s, " \t") || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") {
		return false
	}
	if _, err := exec.LookPath(s); err == nil {
		return false
	}
	if _, err := os.Stat(s); err == nil {
		return false
	}
	host, _, _ := strings.Cut(s, "/")
	return strings.Contains(host, ".") || strings.Contains(host, ":") || host == "localhost"
}

// configErr is an error of reading or writing the config file: ExitConfig
// when the file itself is invalid, else a plain failure (permissions, a
// full disk).
func configErr(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return exitErr(ExitConfig, err)
	}
	return err
}

// configuredNames lists the servers of the config file at path (none when
// it cannot be read).
func configuredNames(path string) []string {
	cfg, err := config.Load(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range cfg.Servers {
		out = append(out, s.Name)
	}
	return out
}

// otherConfig is the config file the running proxyd reads when it is not
// the one this command names (--config, $MCPX_CONFIG or the default).
func otherConfig(c *cli.Context, st *api.Status) (string, bool) {
	if st.ConfigPath == "" {
		return "", false
	}
	return st.ConfigPath, !samePath(st.ConfigPath, configPath(c))
}

// warnOtherConfig says so on stderr when what a command shows is the
// running proxyd's configuration from another file than the one it names.
func warnOtherConfig(c *cli.Context, st *api.Status) {
	if other, ok := otherConfig(c, st); ok {
		errorf(c, "warning: the running proxyd (pid %d) reads %s, not %s; shown is what it serves\n", st.PID, other, configPath(c))
	}
}

// samePath says whether two paths name one file (or, neither existing,
// the same place).
func samePath(a, b string) bool {
	if ia, err := os.Stat(a); err == nil {
		if ib, err := os.Stat(b); err == nil {
			return os.SameFile(ia, ib)
		}
		return false
	}
	aa, _ := filepath.Abs(a)
	ab, _ := filepath.Abs(b)
	return aa == ab
}
