package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

var connectInfoCommand = &cli.Command{
	Name:  "connect-info",
	Usage: "print what an MCP client needs to use proxyd",
	Description: `Prints proxyd's MCP endpoint and bearer header, and ready-made snippets for
Claude Code, Cursor and generic clients, plus the 'mcpx stdio' command
for clients that only speak stdio. The bearer token is a credential:
this command prints it in full because you asked for it; keep the output
private.

Examples:
   mcpx connect-info
   mcpx connect-info -o json`,
	Flags:  []cli.Flag{outputFlag},
	Action: runConnectInfo,
}

func runConnectInfo(c *cli.Context) error {
	info, err := newClient(c).ConnectInfo(c.Context)
	if err != nil {
		return daemonErr(err)
	}
	return render(c, info, func(w io.Writer) error {
		token := strings.TrimPrefix(info.Header, "Authorization: Bearer ")
		fmt.Fprintf(w, "MCP endpoint (Streamable HTTP): %s\n", info.URL)
		fmt.Fprintf(w, "Header:                         %s\n", info.Header)
		fmt.Fprintf(w, "Token file:                     %s\n\n", info.TokenFile)
		fmt.Fprintln(w, "Claude Code:")
		fmt.Fprintf(w, "  claude mcp add --transport http mcpx %s --header \"Authorization: Bearer %s\"\n\n", info.URL, token)
		cursor := map[string]any{"mcpServers": map[string]any{"mcpx": map[string]any{
			"url": info.URL, "headers": map[string]string{"Authorization": "Bearer " + token}}}}
		b, _ := json.MarshalIndent(cursor, "  ", "  ")
		fmt.Fprintf(w, "Cursor (~/.cursor/mcp.json) and other JSON-configured clients:\n  %s\n\n", b)
		stdio := map[string]any{"mcpServers": map[string]any{"mcpx": map[string]any{
			"command": info.StdioCommand[0], "args": info.StdioCommand[1:]}}}
		b, _ = json.MarshalIndent(stdio, "  ", "  ")
		fmt.Fprintf(w, "stdio-only clients (no token needed; the socket is the credential):\n  %s\n", b)
		return nil
	})
}
