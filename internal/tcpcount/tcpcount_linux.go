// Package tcpcount reads the kernel's count of the data segments a TCP
// connection has sent and received, for tests that check how many writes
// a message took: on loopback, with Nagle's algorithm off (Go's default
// on both ends), each write of up to a segment's size is one segment.
package tcpcount

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// DataSegments returns the data segments the connection has received
// and sent so far. Sent counts first transmissions only: a retransmission
// (a tail loss probe when a loaded machine is slow to acknowledge) is a
// second segment for one write.
func DataSegments(raw syscall.RawConn) (in, out uint32, err error) {
	var info *unix.TCPInfo
	if cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil {
		return 0, 0, fmt.Errorf("reaching the socket: %w", cerr)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reading TCP_INFO: %w", err)
	}
	return info.Data_segs_in, info.Data_segs_out - info.Total_retrans, nil
}
