package commands

import (
	"bytes"
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
for clients that only speak stdio. The bearer token is a credential: it
is shown shortened (mcpx_…) and the snippets read it from the token file;
--show-token prints it in full (keep that output private).

Examples:
   mcpx connect-info
   mcpx connect-info --show-token -o json | jq -r .header`,
	Flags:  []cli.Flag{outputFlag, &cli.BoolFlag{Name: "show-token", Usage: "print the bearer token in full"}},
	Action: runConnectInfo,
}

// shortToken shows only what kind of token it is.
func shortToken(t string) string {
	if p, _, ok := strings.Cut(t, "_"); ok && len(p) < 8 {
		return p + "_…"
	}
	if len(t) > 4 {
		return t[:4] + "…"
	}
	return "…"
}

func runConnectInfo(c *cli.Context) error {
	info, err := newClient(c).ConnectInfo(c.Context)
	if err != nil {
		return daemonErr(err)
	}
	token := strings.TrimPrefix(info.Header, "Authorization: Bearer ")
	shellToken, jsonToken := token, token
	if !c.Bool("show-token") {
		info.Header = "Authorization: Bearer " + shortToken(token)
		shellToken, jsonToken = "$(cat "+info.TokenFile+")", "<the token in "+info.TokenFile+">"
	}
	return render(c, info, func(w io.Writer) error {
		fmt.Fprintf(w, "MCP endpoint (Streamable HTTP): %s\n", info.URL)
		fmt.Fprintf(w, "Header:                         %s\n", info.Header)
		fmt.Fprintf(w, "Token file:                     %s\n\n", info.TokenFile)
		fmt.Fprintln(w, "Claude Code:")
		fmt.Fprintf(w, "  claude mcp add --transport http mcpx %s --header \"Authorization: Bearer %s\"\n\n", info.URL, shellToken)
		cursor := map[string]any{"mcpServers": map[string]any{"mcpx": map[string]any{
			"url": info.URL, "headers": map[string]string{"Authorization": "Bearer " + jsonToken}}}}
		fmt.Fprintf(w, "Cursor (~/.cursor/mcp.json) and other JSON-configured clients:\n  %s\n\n", snippet(cursor))
		stdio := map[string]any{"mcpServers": map[string]any{"mcpx": map[string]any{
			"command": info.StdioCommand[0], "args": info.StdioCommand[1:]}}}
		fmt.Fprintf(w, "stdio-only clients (no token needed; the socket is the credential):\n  %s\n", snippet(stdio))
		return nil
	})
}

// snippet is v as indented JSON to paste into a client's config: as a
// person writes it, with <, > and & as themselves rather than the \u
// escapes encoding/json uses for HTML.
func snippet(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
