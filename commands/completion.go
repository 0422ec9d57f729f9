package commands

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print a shell completion script (bash, zsh or fish)",
	ArgsUsage: "bash|zsh|fish",
	Description: `Prints a script that completes mcpx's commands, flags and configured
server names. The same scripts are in the repository's completions/.

Examples:
   source <(mcpx completion bash)
   mcpx completion zsh > "${fpath[1]}/_mcpx"
   mcpx completion fish > ~/.config/fish/completions/mcpx.fish`,
	Action: runCompletion,
}

func runCompletion(c *cli.Context) error {
	if c.NArg() == 0 {
		fmt.Fprintln(c.App.Writer, "Shells: bash, zsh, fish")
		fmt.Fprintln(c.App.Writer, "Print one's script with 'mcpx completion SHELL' (see 'mcpx completion --help').")
		return nil
	}
	script, err := CompletionScript(c.App, c.Args().First())
	if err != nil {
		return exitErr(ExitUsage, err)
	}
	_, err = fmt.Fprint(c.App.Writer, script)
	return err
}

// CompletionScript returns the completion script for shell.
func CompletionScript(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return bashCompletion, nil
	case "zsh":
		return zshCompletion, nil
	case "fish":
		script, err := app.ToFishCompletion()
		return script + fishDynamic + fishFlagValues(), err
	}
	return "", fmt.Errorf("unknown shell %q: use bash, zsh or fish", shell)
}

// bash and zsh ask the binary itself (urfave's --generate-bash-completion
// protocol), so commands, flags and server names stay current.
const bashCompletion = `# bash completion for mcpx
_mcpx_complete() {
  local cur opts
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$cur" == "-"* ]]; then
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "${cur}" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _mcpx_complete mcpx
`

const zshCompletion = `#compdef mcpx
_mcpx() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _mcpx mcpx
`

// completeServers completes a SERVER argument from the config file (it
// works whether or not proxyd runs), then falls back to flags.
func completeServers(c *cli.Context) {
	if c.NArg() == 0 {
		if cfg, err := config.Load(configPath(c)); err == nil {
			for _, s := range cfg.Servers {
				fmt.Fprintln(c.App.Writer, s.Name)
			}
		}
	}
	cli.DefaultCompleteWithFlags(c.Command)(c)
}

// completeCall completes a SERVER, then that server's tools (asking
// proxyd, briefly; nothing when it is not running).
func completeCall(c *cli.Context) {
	if c.NArg() == 1 {
		ctx, cancel := context.WithTimeout(c.Context, 2*time.Second)
		defer cancel()
		if tools, err := newClient(c).Tools(ctx, c.Args().First()); err == nil {
			for _, t := range tools {
				fmt.Fprintln(c.App.Writer, t.Name)
			}
		}
		return
	}
	completeServers(c)
}

// flagValues are the values completed after a flag that takes one of a
// few.
var flagValues = map[string][]string{
	"output":       {"table", "tsv", "json", "yaml"},
	"o":            {"table", "tsv", "json", "yaml"},
	"fault-domain": callerr.Domains,
	"error-class":  callerr.Classes,
	"transport":    {"streamable-http", "sse", "stdio"},
	"protocol":     {"auto", "legacy", "modern"},
	"status":       api.CallStatuses,
	"by":           {"server", "tool", "class", "domain", "replica"},
	"elicit":       {"decline", "cancel", "defaults"},
}

// completeFlagValue answers a completion request whose last word is a flag
// with known values (urfave/cli would take the request as the flag's
// value); false when the request is not one.
func completeFlagValue(w io.Writer, args []string) bool {
	n := len(args)
	if n < 3 || args[n-1] != "--generate-bash-completion" || !strings.HasPrefix(args[n-2], "-") {
		return false
	}
	flag := strings.TrimLeft(args[n-2], "-")
	vals, ok := flagValues[flag]
	if !ok {
		return false
	}
	if (flag == "output" || flag == "o") && slices.ContainsFunc(args, isReportCommand) {
		vals = append(slices.Clone(vals), reportFormats...)
	}
	for _, v := range vals {
		fmt.Fprintln(w, v)
	}
	return true
}

// fishDynamic makes fish ask the binary, like bash and zsh, for what
// follows a command: server and tool names, flag values.
const fishDynamic = `
function __fish_mcpx_dynamic
    set -l words (commandline -opc)
    $words --generate-bash-completion 2>/dev/null
end
complete -c mcpx -f -n 'not __fish_mcpx_no_subcommand' -a '(__fish_mcpx_dynamic)'
`

// fishFlagValues completes the values of flags with a known few.
func fishFlagValues() string {
	names := make([]string, 0, len(flagValues))
	for n := range flagValues {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		opt := "-l " + n
		if len(n) == 1 {
			opt = "-s " + n
		}
		fmt.Fprintf(&b, "complete -c mcpx %s -x -a '%s'\n", opt, strings.Join(flagValues[n], " "))
	}
	fmt.Fprintf(&b, "complete -c mcpx -n '__fish_seen_subcommand_from %s' -s o -l output -x -a '%s'\n",
		strings.Join(reportCommands, " "), strings.Join(reportFormats, " "))
	return b.String()
}

// reportCommands write CI reports: their -o also takes reportFormats.
var (
	reportCommands = []string{"probe", "session", "refresh"}
	reportFormats  = []string{"sarif", "junit"}
)

func isReportCommand(word string) bool { return slices.Contains(reportCommands, word) }
