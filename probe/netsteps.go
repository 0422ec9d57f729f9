package probe

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/certpool"
)

// resolver is replaced in tests only.
var resolver = net.DefaultResolver

func (r *runner) dnsStep(ctx context.Context) bool {
	start := time.Now()
	if ip := net.ParseIP(r.host); ip != nil {
		r.addrs = []net.IP{ip}
		data := map[string]any{"a": []string{}, "aaaa": []string{}, "literal": true}
		if ip.To4() != nil {
			data["a"] = []string{ip.String()}
		} else {
			data["aaaa"] = []string{ip.String()}
		}
		r.add(StepDNS, StatusOK, start, "literal address "+ip.String()+", no lookup", data)
		return true
	}
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	addrs, err := resolver.LookupIPAddr(sctx, r.host)
	if err == nil && len(addrs) == 0 {
		err = &net.DNSError{Err: "no such host", Name: r.host, IsNotFound: true}
	}
	if err != nil {
		res := classifyOr(err, Result{Code: CodeDNSFailure, Reason: ReasonOther})
		if res.Code == CodeDNSFailure {
			res.Message = "name did not resolve: " + clean(err.Error())
		}
		r.fail(StepDNS, start, res, nil)
		return false
	}
	var v4, v6 []string
	for _, a := range addrs {
		r.addrs = append(r.addrs, a.IP)
		if a.IP.To4() != nil {
			v4 = append(v4, a.IP.String())
		} else {
			v6 = append(v6, a.IP.String())
		}
	}
	detail := fmt.Sprintf("%s → %s", r.host, strings.Join(append(append([]string{}, v4...), v6...), ", "))
	r.add(StepDNS, StatusOK, start, detail, map[string]any{"a": v4, "aaaa": v6})
	return true
}

func (r *runner) tcpStep(ctx context.Context) bool {
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	var d net.Dialer
	type tried struct {
		Address string `json:"address"`
		Error   string `json:"error,omitempty"`
	}
	var attempts []tried
	var lastErr error
	for _, ip := range r.addrs {
		addr := net.JoinHostPort(ip.String(), r.port)
		conn, err := d.DialContext(sctx, "tcp", addr)
		if err != nil {
			attempts = append(attempts, tried{Address: addr, Error: clean(err.Error())})
			lastErr = err
			if sctx.Err() != nil {
				break
			}
			continue
		}
		attempts = append(attempts, tried{Address: addr})
		r.conn = conn
		detail := "connected to " + addr
		if len(attempts) > 1 {
			detail += fmt.Sprintf(" (after %d failed)", len(attempts)-1)
		}
		r.add(StepTCP, StatusOK, start, detail, map[string]any{"address": addr, "tried": attempts})
		return true
	}
	res := classifyOr(lastErr, Result{Code: CodeConnectionUnreachable, Reason: ReasonOther,
		Hint: "check the host and port, and that the server is running"})
	if res.Code == CodeConnectionUnreachable || res.Code == CodeTimeout {
		res.Message = fmt.Sprintf("cannot connect to %s: %s", r.hostPort(), clean(lastErr.Error()))
	}
	if res.Reason == ReasonRefused {
		res.Hint = fmt.Sprintf("nothing listens on %s: check the port in the URL and that the server is running", r.hostPort())
	}
	r.fail(StepTCP, start, res, map[string]any{"tried": attempts})
	return false
}

type poolResult struct {
	pool *x509.CertPool
	err  error
}

// loadPool starts loading the trust store, which can take a while on a
// cold start, so that it overlaps the dns and tcp steps.
func (r *runner) loadPool() {
	r.pool = make(chan poolResult, 1)
	go func() {
		p, err := rootPool(r.opts.CAFile)
		r.pool <- poolResult{p, err}
	}()
}

// poolCache keeps built pools per CA file version: cloning the system
// store for every probe is a measurable share of a healthy probe. Pools are
// only read after they are built.
var poolCache struct {
	sync.Mutex
	m map[string]*x509.CertPool
}

// rootPool is the system trust store (which honours SSL_CERT_FILE and
// SSL_CERT_DIR) plus the CA file.
func rootPool(caFile string) (*x509.CertPool, error) {
	key := ""
	if caFile != "" {
		fi, err := os.Stat(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading CA file: %w", err)
		}
		key = fmt.Sprintf("%s\x00%d\x00%d", caFile, fi.Size(), fi.ModTime().UnixNano())
	}
	poolCache.Lock()
	p, ok := poolCache.m[key]
	poolCache.Unlock()
	if ok {
		return p, nil
	}
	p, err := certpool.Load(caFile)
	if err != nil {
		return nil, err
	}
	poolCache.Lock()
	if poolCache.m == nil || len(poolCache.m) > 32 {
		poolCache.m = map[string]*x509.CertPool{}
	}
	poolCache.m[key] = p
	poolCache.Unlock()
	return p, nil
}

// CertInfo describes one certificate of the peer's chain.
type CertInfo struct {
	Subject    string    `json:"subject"`
	Issuer     string    `json:"issuer"`
	SANs       []string  `json:"sans,omitempty"`
	NotBefore  time.Time `json:"not_before"`
	NotAfter   time.Time `json:"not_after"`
	DaysLeft   int       `json:"days_left"`
	IsCA       bool      `json:"is_ca"`
	SelfSigned bool      `json:"self_signed"`
	// SHA256 is the fingerprint of the DER certificate, as openssl prints
	// it (AB:CD:...); PEM the certificate itself (public, for --show-certs).
	SHA256 string `json:"sha256"`
	PEM    string `json:"pem,omitempty"`
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

func describeChain(chain []*x509.Certificate, now time.Time) []CertInfo {
	out := make([]CertInfo, 0, len(chain))
	for _, c := range chain {
		var sans []string
		sans = append(sans, c.DNSNames...)
		for _, ip := range c.IPAddresses {
			sans = append(sans, ip.String())
		}
		for _, u := range c.URIs {
			sans = append(sans, u.String())
		}
		out = append(out, CertInfo{
			Subject:    c.Subject.String(),
			Issuer:     c.Issuer.String(),
			SANs:       sans,
			NotBefore:  c.NotBefore.UTC(),
			NotAfter:   c.NotAfter.UTC(),
			DaysLeft:   int(c.NotAfter.Sub(now).Hours() / 24),
			IsCA:       c.IsCA,
			SelfSigned: selfSigned(c),
			SHA256:     fingerprint(c.Raw),
			PEM:        string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})),
		})
	}
	return out
}

func (r *runner) tlsStep(ctx context.Context) bool {
	if r.target.Scheme != "https" {
		r.add(StepTLS, StatusSkip, time.Time{}, "plain http:// target: no TLS", nil)
		return true
	}
	start := time.Now()
	var pr poolResult
	select {
	case pr = <-r.pool:
	case <-ctx.Done():
		pr.err = ctx.Err()
	}
	pool, err := pr.pool, pr.err
	if err != nil {
		r.fail(StepTLS, start, Result{Code: CodeTLSCertificate, Reason: ReasonOther,
			Message: clean(err.Error()), Hint: "check the --ca-file path (or tls.ca_file in config): it must be a PEM bundle"}, nil)
		return false
	}
	var clientCertRequested bool
	r.tlsConfig = &tls.Config{
		ServerName: r.host,
		RootCAs:    pool,
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS12,
	}
	cfg := r.tlsConfig.Clone()
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		clientCertRequested = true
		return &tls.Certificate{}, nil // none: the probe has no client certificate
	}
	sctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	tc := tls.Client(r.conn, cfg)
	err = tc.HandshakeContext(sctx)
	now := time.Now()
	if err != nil {
		r.conn.Close()
		r.conn = nil
		data := map[string]any{}
		var cve *tls.CertificateVerificationError
		if errors.As(err, &cve) {
			data["chain"] = describeChain(cve.UnverifiedCertificates, now)
			data["verified"] = false
			data["verification"] = clean(cve.Err.Error())
		}
		res := classifyOr(err, Result{Code: CodeTLSProtocol, Reason: ReasonHandshakeFailure,
			Hint: "the TLS handshake failed: compare with `openssl s_client -connect " + r.hostPort() + " -servername " + r.host + "`"})
		if res.Code == CodeTLSProtocol && res.Message == "" {
			res.Message = "TLS handshake failed: " + clean(err.Error())
		}
		if res.Code == CodeTimeout {
			res.Message = fmt.Sprintf("the TLS handshake with %s did not complete within %s", r.hostPort(), r.opts.Timeout)
			res.Hint = "the port accepts connections but does not answer TLS: check that it is the TLS port, or a firewall or proxy in between"
		}
		if len(data) == 0 {
			data = nil
		}
		r.fail(StepTLS, start, res, data)
		return false
	}
	r.conn = tc
	cs := tc.ConnectionState()
	chain := describeChain(cs.PeerCertificates, now)
	data := map[string]any{
		"version":  tls.VersionName(cs.Version),
		"cipher":   tls.CipherSuiteName(cs.CipherSuite),
		"alpn":     cs.NegotiatedProtocol,
		"chain":    chain,
		"verified": true,
	}
	status := StatusOK
	var notes []string
	for i, c := range cs.PeerCertificates {
		if left := c.NotAfter.Sub(now); left < certExpiryWarn {
			status = StatusWarn
			if i == 0 {
				notes = append(notes, "the leaf expires in less than 14 days: renew it soon")
			} else {
				notes = append(notes, fmt.Sprintf("chain certificate %q expires in %d days (%s)", c.Subject.CommonName, int(left.Hours()/24), c.NotAfter.UTC().Format(time.DateOnly)))
			}
		}
	}
	if clientCertRequested {
		r.clientCertRequested = true
		status = StatusWarn
		data["client_certificate_requested"] = true
		notes = append(notes, "the server asked for a client certificate; none was sent")
	}
	alpn := cs.NegotiatedProtocol
	if alpn == "" {
		alpn = "none"
	}
	detail := fmt.Sprintf("%s, %s, ALPN %s, verified", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), alpn)
	if len(cs.PeerCertificates) > 0 {
		leaf := cs.PeerCertificates[0]
		detail += fmt.Sprintf("; leaf %q expires %s (%d days)", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.DateOnly), int(leaf.NotAfter.Sub(now).Hours()/24))
	}
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	r.add(StepTLS, status, start, detail, data)
	return true
}
