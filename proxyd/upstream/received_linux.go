package upstream

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// received is how many bytes have reached c since it was opened, whether
// its reader has taken them or not (-1 when unknown).
func received(c net.Conn) int64 {
	n := int64(-1)
	sc, ok := c.(syscall.Conn)
	if !ok {
		return n
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return n
	}
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(info.Bytes_received)
		}
	})
	return n
}
