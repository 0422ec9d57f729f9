// Package tcpproxy forwards TCP connections on loopback for tests that
// need the network between two peers to fail: every connection cut at
// once (a load balancer's idle cut), the address refusing connections
// and taking them again (a server gone and back), or each connection cut
// after a time of its own (a network that drops connections).
package tcpproxy

import (
	"io"
	"net"
	"net/url"
	"sync"
	"time"
)

// Proxy forwards each connection to its address to target.
type Proxy struct {
	target   string
	cutAfter func() time.Duration

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	cuts  int // Cut calls so far: a connection taken before one is cut too
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target. With
// cutAfter set, each connection is cut after the time it gives.
func Start(target string, cutAfter func() time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, cutAfter: cutAfter, ln: ln, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln.Addr().String()
}

// URL is u with its host the proxy's.
func (p *Proxy) URL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	pu.Host = p.Addr()
	return pu.String()
}

// Cut closes every connection open now; new ones are still taken.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	for c := range p.conns {
		c.Close()
	}
}

// Down stops taking connections (a dial is refused) and cuts those open.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.ln.Close()
	p.mu.Unlock()
	p.Cut()
}

// Up takes connections again on the same address.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ln, err := net.Listen("tcp", p.ln.Addr().String())
	if err != nil {
		return err
	}
	p.ln = ln
	p.serve(ln)
	return nil
}

// Close stops the proxy, cuts every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.Down()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cuts := p.cuts
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(in, cuts)
			}()
		}
	}()
}

// forward carries one connection, taken when cuts was the count of Cut
// calls, both ways until either side ends or it is cut.
func (p *Proxy) forward(in net.Conn, cuts int) {
	defer in.Close()
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer out.Close()
	p.mu.Lock()
	if p.cuts != cuts {
		p.mu.Unlock()
		return // cut while it was dialled
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, in)
		delete(p.conns, out)
		p.mu.Unlock()
	}()
	if p.cutAfter != nil {
		cut := time.AfterFunc(p.cutAfter(), func() { in.Close(); out.Close() })
		defer cut.Stop()
	}
	go func() { _, _ = io.Copy(out, in); out.Close() }()
	_, _ = io.Copy(in, out)
}
