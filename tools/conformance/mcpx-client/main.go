// Command mcpx-client lets the MCP conformance suite drive mcpx as an MCP
// client. The runner invokes it as
//
//	mcpx-client [FLAGS] SERVER_URL
//
// with MCP_CONFORMANCE_SCENARIO and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (JSON: pre-registered client credentials, a
// private key, a workload identity token, the enterprise IdP) in the
// environment. It does what a user does, with the real binary: start
// proxyd on a private socket and state dir, add the server to the config
// (secrets from the context written to 0600 files and referenced as
// ${file:...}, as a user keeps them), then per scenario: `mcpx login`
// (with a headless browser where a browser is needed), `mcpx tools`,
// `mcpx call` with the arguments the scenario's tools expect, reads and
// prompts through proxyd's MCP endpoint, `mcpx down`.
//
// The mcpx binary is $MCPX_BIN, else mcpx on PATH. Run with --browse URL,
// it is the headless browser: it follows redirects from URL to proxyd's
// loopback callback, as a browser whose user approves would.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// serverName is the name the server under test gets in the config.
const serverName = "conformance"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpx-client: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	browse := flag.String("browse", "", "act as the headless browser: follow redirects from this URL")
	keep := flag.Bool("keep", false, "keep the temporary state dir (for debugging)")
	flag.Parse()
	if *browse != "" {
		return openURL(*browse)
	}
	if flag.NArg() < 1 {
		return errors.New("usage: mcpx-client SERVER_URL")
	}
	serverURL := flag.Arg(flag.NArg() - 1)
	bin := os.Getenv("MCPX_BIN")
	if bin == "" {
		p, err := exec.LookPath("mcpx")
		if err != nil {
			return fmt.Errorf("no mcpx binary: set MCPX_BIN or put mcpx on PATH: %w", err)
		}
		bin = p
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating this program for the browser command: %w", err)
	}
	// A short /tmp path: the socket must fit in sun_path.
	dir, err := os.MkdirTemp("/tmp", "mcpx-conf-")
	if err != nil {
		return fmt.Errorf("creating the state dir: %w", err)
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	sc, err := parseContext(os.Getenv("MCP_CONFORMANCE_CONTEXT"))
	if err != nil {
		return err
	}
	m := &mcpx{bin: bin, dir: dir, browser: shellQuote(self) + " --browse"}
	if err := m.writeConfig(scenario, serverURL, sc); err != nil {
		return err
	}
	if _, err := m.run("up", "--log-level", "debug"); err != nil {
		return err
	}
	defer func() {
		if _, err := m.run("down"); err != nil {
			fmt.Fprintf(os.Stderr, "mcpx-client: %v\n", err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "state", "proxyd.log")); err == nil && os.Getenv("MCPX_CLIENT_LOG") == "1" {
			fmt.Fprintf(os.Stderr, "--- proxyd.log\n%s", b)
		}
	}()
	return handlerFor(scenario)(m, sc)
}
