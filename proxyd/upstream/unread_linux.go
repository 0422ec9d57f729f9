package upstream

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unread is how many bytes have reached c and wait in the kernel for its
// reader (0 when unknown).
func unread(c net.Conn) int {
	n := 0
	control(c, func(fd int) { n, _ = unix.IoctlGetInt(fd, unix.SIOCINQ) })
	return n
}

// received is how many bytes have reached c since it was opened, whether
// its reader has taken them or not (-1 when unknown).
func received(c net.Conn) int64 {
	n := int64(-1)
	control(c, func(fd int) {
		if info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(info.Bytes_received)
		}
	})
	return n
}

// control runs f on c's socket, when c has one.
func control(c net.Conn, f func(fd int)) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countedConn); ok {
		c = cc.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	if raw, err := sc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { f(int(fd)) })
	}
}
