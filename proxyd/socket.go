package proxyd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxSocketPath is the longest path that fits sun_path on every platform
// proxyd runs on (Linux allows 107 bytes, macOS 103).
const maxSocketPath = 103

// AlreadyRunningError means a live daemon answers on the socket.
type AlreadyRunningError struct{ Socket string }

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("proxyd is already running on %s (stop it with 'mcpx down', or choose another --socket)", e.Socket)
}

// listenSocket creates the control socket 0600 in a private directory
// (see privateDir). A live daemon on the path is an error; a dead socket file is
// removed; any other file in the way is left alone.
func listenSocket(path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, longer than the %d a Unix socket allows; choose a shorter --socket", path, len(path), maxSocketPath)
	}
	if err := privateDir(filepath.Dir(path), "socket directory", "--socket", "the socket"); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it or choose another --socket", path)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, derr := (&net.Dialer{}).DialContext(ctx, "unix", path)
		cancel()
		if derr == nil {
			conn.Close()
			return nil, &AlreadyRunningError{Socket: path}
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) && !errors.Is(derr, syscall.ENOENT) {
			return nil, fmt.Errorf("checking the existing socket %s: %w", path, derr)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
		}
	}
	// The umask makes the socket 0600 from birth; chmod confirms it.
	old := syscall.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, &AlreadyRunningError{Socket: path}
		}
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("securing socket %s: %w", path, err)
	}
	return ln, nil
}

// peerUID returns the uid of the process at the other end of c.
func peerUID(c net.Conn) (int, error) {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn() // a connection counted by the listener's cap
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}
