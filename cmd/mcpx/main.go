// Command mcpx is the MCP ops and diagnostics toolkit and its daemon,
// proxyd. See "mcpx help".
package main

import (
	"os"

	"github.com/mcpx-dev/mcpx/commands"
	"github.com/mcpx-dev/mcpx/internal/startup"
)

func main() {
	startup.Done()
	os.Exit(commands.Main())
}
