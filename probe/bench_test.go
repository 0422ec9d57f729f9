package probe_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpx-dev/mcpx/probe"
)

// captured is one request the probe sent, replayed by the minimal client.
type captured struct {
	method string
	header http.Header
	body   []byte
}

// benchServer is a healthy MCP server over TLS (HTTP/2) that records the
// requests it receives while recording is on.
type benchServer struct {
	ts     *httptest.Server
	url    string
	caFile string
	caPEM  []byte

	mu        sync.Mutex
	recording bool
	reqs      []captured
}

func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	s := server.NewMCPServer("bench", "1.0.0", server.WithToolCapabilities(false))
	h := server.NewStreamableHTTPServer(s)
	bs := &benchServer{}
	bs.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bs.mu.Lock()
		if bs.recording {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			bs.reqs = append(bs.reqs, captured{method: r.Method, header: r.Header.Clone(), body: body})
		}
		bs.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	bs.ts.EnableHTTP2 = true
	bs.ts.StartTLS()
	b.Cleanup(bs.ts.Close)
	bs.url = bs.ts.URL + "/mcp"
	bs.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bs.ts.Certificate().Raw})
	bs.caFile = filepath.Join(b.TempDir(), "ca.pem")
	if err := os.WriteFile(bs.caFile, bs.caPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	return bs
}

func (bs *benchServer) options() probe.Options {
	return probe.Options{Target: bs.url, CAFile: bs.caFile, Timeout: 5 * time.Second}
}

// capture runs one probe and keeps the requests it made.
func (bs *benchServer) capture(b *testing.B) []captured {
	b.Helper()
	bs.mu.Lock()
	bs.recording, bs.reqs = true, nil
	bs.mu.Unlock()
	rep := probe.Run(context.Background(), bs.options())
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.recording = false
	if rep.Result.Code != probe.CodeOK {
		b.Fatalf("probe of the bench server: %+v", rep.Result)
	}
	return bs.reqs
}

// trustPool is the minimal client's trust store plus CA file, built once
// so that the comparison is about the requests alone.
func trustPool(b *testing.B, caFile string) *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	pool.AppendCertsFromPEM(pemBytes)
	return pool
}

// minimalClient makes the same requests with a plain Go client: a fresh
// connection, each request back to back.
func minimalClient(b *testing.B, url string, pool *x509.CertPool, reqs []captured) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	for _, rq := range reqs {
		req, err := http.NewRequest(rq.method, url, bytes.NewReader(rq.body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = rq.header.Clone()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkProbeHealthy(b *testing.B) {
	bs := newBenchServer(b)
	opts := bs.options()
	b.ResetTimer()
	for b.Loop() {
		if rep := probe.Run(context.Background(), opts); rep.Result.Code != probe.CodeOK {
			b.Fatalf("result %+v", rep.Result)
		}
	}
}

func BenchmarkMinimalClient(b *testing.B) {
	bs := newBenchServer(b)
	reqs := bs.capture(b)
	pool := trustPool(b, bs.caFile)
	b.ResetTimer()
	for b.Loop() {
		minimalClient(b, bs.url, pool, reqs)
	}
}

// BenchmarkProbeVsMinimal interleaves both and reports probe time over
// minimal-client time as "ratio" (target: at most 1.2).
func BenchmarkProbeVsMinimal(b *testing.B) {
	bs := newBenchServer(b)
	reqs := bs.capture(b)
	pool := trustPool(b, bs.caFile)
	opts := bs.options()
	var probeTotal, minTotal time.Duration
	b.ResetTimer()
	for b.Loop() {
		s := time.Now()
		probe.Run(context.Background(), opts)
		probeTotal += time.Since(s)
		s = time.Now()
		minimalClient(b, bs.url, pool, reqs)
		minTotal += time.Since(s)
	}
	b.ReportMetric(float64(probeTotal)/float64(minTotal), "ratio")
	b.ReportMetric(float64(len(reqs)), "requests")
}
