package api

import (
	"os"
	"path/filepath"
)

// Environment variables that stand in for the global flags.
const (
	EnvSocket   = "MCPX_SOCKET"
	EnvConfig   = "MCPX_CONFIG"
	EnvStateDir = "MCPX_STATE_DIR"
)

// DefaultStateDir is $XDG_STATE_HOME/mcpx, else ~/.local/state/mcpx.
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcpx")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return filepath.Join(os.TempDir(), "mcpx-state")
	}
	return filepath.Join(home, ".local", "state", "mcpx")
}

// DefaultSocket is $XDG_RUNTIME_DIR/mcpx/proxyd.sock, else a per-user
// directory under the state dir.
func DefaultSocket(stateDir string) string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "mcpx", "proxyd.sock")
	}
	if stateDir == "" {
		stateDir = DefaultStateDir()
	}
	return filepath.Join(stateDir, "run", "proxyd.sock")
}
