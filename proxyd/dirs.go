package proxyd

import (
	"errors"
	"fmt"
	"os"
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
