package upstream

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// received is how many bytes have reached the connection of raw since it
// was opened, whether its reader has taken them or not (-1 when unknown).
func received(raw syscall.RawConn) int64 {
	n := int64(-1)
	if raw == nil {
		return n
	}
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(info.Bytes_received)
		}
	})
	return n
}
