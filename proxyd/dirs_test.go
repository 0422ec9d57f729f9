package proxyd

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory proxyd did not create keeps its mode; one writable by others
// is refused for the socket with the reason; missing ones are created 0700.
func TestDirectoriesProxydDidNotCreate(t *testing.T) {
	cases := []struct {
		name          string
		socketDirMode os.FileMode // 0: proxyd creates the socket dir
		stateDirMode  os.FileMode // 0: proxyd creates the state dir
		wantErr       string
	}{
		{name: "both created", wantErr: ""},
		{name: "existing private socket dir", socketDirMode: 0o750},
		{name: "existing readable state dir", stateDirMode: 0o755},
		{name: "sticky world-writable socket dir", socketDirMode: 0o777 | os.ModeSticky, wantErr: "writable by other users"},
		{name: "group-writable socket dir", socketDirMode: 0o770, wantErr: "writable by other users"},
		{name: "world-writable state dir", stateDirMode: 0o777 | os.ModeSticky, wantErr: "writable by other users"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := shortTempDir(t)
			sockDir := filepath.Join(base, "run")
			stateDir := filepath.Join(base, "state")
			for dir, mode := range map[string]os.FileMode{sockDir: tc.socketDirMode, stateDir: tc.stateDirMode} {
				if mode == 0 {
					continue
				}
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				// Chmod, not Mkdir's mode: the umask must not change what we test.
				if err := os.Chmod(dir, mode); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(base, "config.yaml")
			if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ready := make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				errc <- Run(ctx, Options{Socket: filepath.Join(sockDir, "s.sock"), StateDir: stateDir, ConfigPath: cfg,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Ready: ready})
			}()
			var err error
			select {
			case <-ready:
				cancel()
				err = <-errc
			case err = <-errc:
				cancel()
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run: %v, want an error saying %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "choose") {
					t.Fatalf("Run: %v, want the fix named", err)
				}
			}
			for dir, mode := range map[string]os.FileMode{sockDir: tc.socketDirMode, stateDir: tc.stateDirMode} {
				fi, serr := os.Stat(dir)
				if serr != nil {
					if tc.wantErr != "" {
						continue // refused before creating it
					}
					t.Fatal(serr)
				}
				want := mode
				if want == 0 {
					want = os.ModeDir | 0o700
				} else {
					want |= os.ModeDir
				}
				if fi.Mode()&(os.ModeDir|os.ModePerm|os.ModeSticky) != want {
					t.Errorf("%s: mode %v after proxyd ran, want %v", dir, fi.Mode(), want)
				}
			}
		})
	}
}
