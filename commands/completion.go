package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

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
		return app.ToFishCompletion()
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
