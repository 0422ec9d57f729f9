package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// mcpx runs the real binary against this run's proxyd.
type mcpx struct {
	bin, dir, browser string
	signedIn          bool // a sign-in was attempted: an error state is an answer
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

// waitSettled polls mcpx status until proxyd has connected the server or
// given up for now (ready, degraded or error; with untilReady, only ready
// or degraded: proxyd retries a failed connection), within a bound.
func (m *mcpx) waitSettled(untilReady bool) (string, error) {
	deadline := time.Now().Add(40 * time.Second)
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
						switch s.State {
						case "ready", "degraded":
							return s.State, nil
						case "error":
							if !untilReady {
								return s.State, nil
							}
						}
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded above
	}
	return "", fmt.Errorf("server %s not connected after 40s (last state %q)", serverName, last)
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
