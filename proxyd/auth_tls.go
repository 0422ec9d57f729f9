package proxyd

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/certpool"
	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// signInTrust holds, per CA file, the HTTP client and the discovery cache
// of the sign-ins of servers behind a private CA: the server's
// tls.ca_file applies to every request of its sign-in (metadata,
// registration, token endpoint, revocation), not only to its MCP
// connection. Servers without one share proxyd's.
type signInTrust struct {
	mu sync.Mutex
	m  map[string]*trusted // CA file → client and discoverer
}

type trusted struct {
	hc   *http.Client
	disc *discovery.Discoverer
}

// maxTrusted bounds the cache: a config lists a few CA files at most.
const maxTrusted = 64

// oauthFor returns the OAuth HTTP client and discoverer for s.
func (d *Daemon) oauthFor(s config.Server) (*http.Client, *discovery.Discoverer, error) {
	if s.TLS == nil || s.TLS.CAFile == "" {
		return d.auth.hc, d.discoverer, nil
	}
	t := &d.auth.trust
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.m[s.TLS.CAFile]; ok {
		return tr.hc, tr.disc, nil
	}
	pool, err := certpool.Load(s.TLS.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.ca_file of %s: %w", s.Name, err)
	}
	hc := discovery.NewHTTPClientTrusting(pool, 30*time.Second)
	tr := &trusted{hc: hc, disc: discovery.New(discovery.NewHTTPClientTrusting(pool, 15*time.Second), discovery.WithLogger(d.log))}
	if t.m == nil || len(t.m) >= maxTrusted {
		t.m = map[string]*trusted{}
	}
	t.m[s.TLS.CAFile] = tr
	return tr.hc, tr.disc, nil
}

// oauthClient is oauthFor's HTTP client; proxyd's own when the CA file
// cannot be read (the sign-in then fails on the certificate, and the
// message names tls.ca_file).
func (d *Daemon) oauthClient(s config.Server) *http.Client {
	hc, _, err := d.oauthFor(s)
	if err != nil {
		return d.auth.hc
	}
	return hc
}
