package tcpcount

import (
	"io"
	"net"
	"testing"
)

// Each write on a loopback connection is one data segment sent by the
// writer and received by the reader.
func TestDataSegments(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := <-accepted
	if r == nil {
		t.Fatal("no connection accepted")
	}
	defer r.Close()
	counts := func(c net.Conn) (in, out uint32) {
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		in, out, err = DataSegments(raw)
		if err != nil {
			t.Fatal(err)
		}
		return in, out
	}
	const writes = 3
	buf := make([]byte, 100)
	for range writes {
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil { // each write arrives before the next
			t.Fatal(err)
		}
	}
	if _, out := counts(w); out != writes {
		t.Errorf("writer sent %d data segments, want %d", out, writes)
	}
	if in, _ := counts(r); in != writes {
		t.Errorf("reader received %d data segments, want %d", in, writes)
	}
}
