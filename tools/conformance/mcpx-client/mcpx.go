// Command mcpx-client lets the MCP conformance suite drive mcpx as an
// OAuth client. The runner invokes it as
//
//	mcpx-client [FLAGS] SERVER_URL
//
// with MCP_CONFORMANCE_SCENARIO and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (JSON, e.g. a pre-registered client id and
// secret) in the environment. It does what a user does, with the real
// binary: start proxyd on a private socket and state dir, add the server
// to the config (client credentials from the context under oauth.*),
// `mcpx login` with a headless browser, `mcpx tools`, `mcpx call` a tool
// (signing in again when the server asks for more scope), `mcpx down`.
//
// The mcpx binary is $MCPX_BIN, else mcpx on PATH. Run with --browse URL,
// it is the headless browser: it follows redirects from URL to proxyd's
// loopback callback, as a browser whose user approves would.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serverName is the name the server under test gets in the config.
const serverName = "conformance"

// clientMetadataURL is the client ID metadata document URL the suite's
// authorization server expects (basic-cimd); mcpx uses it only when the
// authorization server advertises client_id_metadata_document_supported.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// maxSignIns bounds sign-ins per run: the first, plus scope step-ups.
// proxyd itself refuses after its own limit; this only stops a loop.
const maxSignIns = 6

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
	m := &mcpx{bin: bin, dir: dir, browser: shellQuote(self) + " --browse"}
	ctxJSON := os.Getenv("MCP_CONFORMANCE_CONTEXT")
	if err := m.writeConfig(serverURL, ctxJSON); err != nil {
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
	return m.exercise()
}

// exercise signs in, lists the tools and calls one. A refusal of the
// credentials (error_class auth, e.g. 403 insufficient_scope) leads to
// another sign-in, as a user would do; proxyd requests the stepped-up
// scopes and refuses once its step-up limit is spent.
func (m *mcpx) exercise() error {
	var lastErr error
	for i := 0; i < maxSignIns; i++ {
		if _, err := m.run("login", serverName, "--timeout", "30s"); err != nil {
			if lastErr != nil {
				return fmt.Errorf("%w (after: %v)", err, lastErr)
			}
			return err
		}
		state, err := m.waitSettled()
		if err != nil {
			return err
		}
		if state == "error" {
			// Connecting with the new token failed (e.g. 403 on
			// tools/list): sign in again, as a user reading status would.
			out, _ := m.run("status")
			lastErr = fmt.Errorf("server %s in state error after sign-in: %s", serverName, strings.TrimSpace(out))
			continue
		}
		out, err := m.run("tools", serverName, "-o", "json")
		if err != nil {
			lastErr = err
			continue // not connected after the sign-in: try signing in again
		}
		var tools []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(out), &tools); err != nil {
			return fmt.Errorf("decoding mcpx tools output: %w", err)
		}
		if len(tools) == 0 {
			return nil // signed in and listed: nothing to call
		}
		out, err = m.run("call", serverName, tools[0].Name, "-o", "json")
		if err == nil {
			return nil
		}
		var res struct {
			Error *struct {
				ErrorClass string `json:"error_class"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(out), &res) == nil && res.Error != nil && res.Error.ErrorClass == "auth" {
			lastErr = err
			continue
		}
		return err
	}
	return fmt.Errorf("gave up after %d sign-ins: %w", maxSignIns, lastErr)
}

type mcpx struct {
	bin, dir, browser string
}

func (m *mcpx) writeConfig(serverURL, ctxJSON string) error {
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if ctxJSON != "" {
		if err := json.Unmarshal([]byte(ctxJSON), &c); err != nil {
			return fmt.Errorf("decoding MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	var b strings.Builder
	// JSON strings are valid YAML double-quoted scalars.
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nservers:\n  - name: %s\n    url: %s\n    oauth:\n", serverName, q(serverURL))
	fmt.Fprintf(&b, "      client_metadata_url: %s\n", q(clientMetadataURL))
	if c.ClientID != "" {
		fmt.Fprintf(&b, "      client_id: %s\n", q(c.ClientID))
	}
	if c.ClientSecret != "" {
		fmt.Fprintf(&b, "      client_secret: %s\n", q(c.ClientSecret))
	}
	if err := os.WriteFile(filepath.Join(m.dir, "config.yaml"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("writing the config: %w", err)
	}
	return nil
}

type exitError struct {
	args []string
	code int
	out  string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("mcpx %s: exit %d: %s", strings.Join(e.args, " "), e.code, strings.TrimSpace(e.out))
}

// run runs one mcpx command against this run's proxyd and returns stdout;
// its stderr goes to ours, for the runner's transcript.
func (m *mcpx) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{
		"--socket", filepath.Join(m.dir, "proxyd.sock"),
		"--config", filepath.Join(m.dir, "config.yaml"),
		"--state-dir", filepath.Join(m.dir, "state"),
	}, args...)
	cmd := exec.CommandContext(ctx, m.bin, full...)
	cmd.Env = append(os.Environ(), "BROWSER="+m.browser, "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(&stdout, os.Stderr)
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	fmt.Fprintf(os.Stderr, "$ mcpx %s\n", strings.Join(args, " "))
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), nil
	case errors.As(err, &ee):
		return stdout.String(), &exitError{args: args, code: ee.ExitCode(), out: stderr.String()}
	default:
		return "", fmt.Errorf("running mcpx %s: %w", strings.Join(args, " "), err)
	}
}

// waitSettled polls mcpx status until proxyd has finished reconnecting
// the server after a sign-in (ready, degraded or error), within a bound.
func (m *mcpx) waitSettled() (string, error) {
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		out, err := m.runQuiet("status", "-o", "json")
		if err == nil {
			var st struct {
				Servers []struct {
					Name  string `json:"name"`
					State string `json:"state"`
				} `json:"servers"`
			}
			if json.Unmarshal([]byte(out), &st) == nil {
				for _, s := range st.Servers {
					if s.Name == serverName {
						last = s.State
						if s.State != "connecting" {
							return s.State, nil
						}
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded above
	}
	return "", fmt.Errorf("server %s still connecting after 20s (last state %q)", serverName, last)
}

func (m *mcpx) runQuiet(args ...string) (string, error) {
	full := append([]string{
		"--socket", filepath.Join(m.dir, "proxyd.sock"),
		"--config", filepath.Join(m.dir, "config.yaml"),
		"--state-dir", filepath.Join(m.dir, "state"),
	}, args...)
	out, err := exec.Command(m.bin, full...).Output()
	return string(out), err
}

// openURL is the headless browser: GET the URL and follow redirects, with
// cookies as a browser keeps them through a login and consent interaction,
// until the authorization server approves and redirects to proxyd's
// loopback callback.
func openURL(u string) error {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return fmt.Errorf("cookie jar: %w", err)
	}
	c := &http.Client{Timeout: 30 * time.Second, Jar: jar}
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Errorf("opening the authorization URL: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 400 {
		return fmt.Errorf("the sign-in page answered HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	return nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
