package proxyd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// privateDir makes sure dir holds nothing another user can swap: a missing
// directory is created 0700 (with any missing parents); an existing one is
// used as it is, never chmod'ed (it may be /tmp or a shared directory the
// user chose), and refused when another user could replace what proxyd
// keeps in it. what names the directory in errors, flag the setting that
// moves it.
func privateDir(dir, what, flag, holds string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the %s %s: %w", what, dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking the %s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the %s %s is not a directory; choose another %s", what, dir, flag)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("the %s %s is writable by other users (mode %v), who could replace %s; choose a %s in a directory only you can write (proxyd creates it 0700 when it does not exist)",
			what, dir, fi.Mode(), holds, flag)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("the %s %s belongs to uid %d, who could replace %s; choose a %s in a directory you own",
			what, dir, st.Uid, holds, flag)
	}
	return nil
}

// LockFile is the name of the state directory's lock: the proxyd holding it
// owns the directory (its token, database and log).
const LockFile = "proxyd.lock"

// StateDirInUseError means another proxyd owns the state directory.
type StateDirInUseError struct {
	Dir, Holder string // Holder: the other proxyd's pid and socket, as it wrote them
}

func (e *StateDirInUseError) Error() string {
	holder := ""
	if e.Holder != "" {
		holder = " (" + e.Holder + ")"
	}
	return fmt.Sprintf("the state directory %s is in use by another proxyd%s; stop it ('mcpx down' with its --socket) or give each proxyd its own --state-dir", e.Dir, holder)
}

// lockStateDir takes the state directory for this daemon until release is
// called (or the process ends: the kernel drops the lock of a killed
// daemon, so a stale lock file never blocks a restart).
func lockStateDir(dir, socket string) (release func(), err error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the state directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &StateDirInUseError{Dir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("locking the state directory %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d, socket %s\n", os.Getpid(), socket)
	return func() { f.Close() }, nil
}
