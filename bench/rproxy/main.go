// Command rproxy is the baseline of the proxy benchmark: a bare
// httputil.ReverseProxy that knows nothing of MCP, the floor for one extra
// HTTP hop. It serves on a free loopback port, prints "url: URL", and
// forwards to the upstream given as its only argument.
package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rproxy UPSTREAM_BASE_URL")
		os.Exit(2)
	}
	target, err := url.Parse(os.Args[1])
	if err != nil || target.Hostname() != "127.0.0.1" {
		fmt.Fprintln(os.Stderr, "rproxy: the upstream must be an http://127.0.0.1 URL")
		os.Exit(2)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	// net/http's HTTP/1 server closes a request's body once the handler
	// starts its response, while the proxy's transport may still be
	// reading that body for its end: the transport then drops the
	// upstream connection and the answer is cut (an SSE answer whose
	// first event was already forwarded ends early). Full duplex keeps
	// the body open, as a proxy needs.
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rproxy:", err)
		os.Exit(1)
	}
	fmt.Printf("url: http://%s\n", ln.Addr())
	if err := http.Serve(ln, proxy); err != nil {
		fmt.Fprintln(os.Stderr, "rproxy:", err)
		os.Exit(1)
	}
}
