package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"
	"time"
)

// Result codes, as documented in the README ("Result codes and exit codes").
const (
	CodeOK                    = "ok"
	CodeAuthRequired          = "auth_required"
	CodeAuthMisconfigured     = "auth_misconfigured"
	CodeDNSFailure            = "dns_failure"
	CodeConnectionUnreachable = "connection_unreachable"
	CodeTimeout               = "timeout"
	CodeTLSCertificate        = "tls_certificate"
	CodeTLSProtocol           = "tls_protocol"
	CodeHTTPStatus            = "http_status"
	CodeNotMCP                = "not_mcp"
	// CodeInvalidTarget is a target that is not a usable http(s) URL; the
	// command reports it as a usage error.
	CodeInvalidTarget = "invalid_target"
)

// Reasons refine a code.
const (
	ReasonUntrusted          = "untrusted"
	ReasonExpired            = "expired"
	ReasonNotYetValid        = "not_yet_valid"
	ReasonHostnameMismatch   = "hostname_mismatch"
	ReasonOther              = "other"
	ReasonRefused            = "refused"
	ReasonReset              = "reset"
	ReasonClosed             = "closed_during_handshake"
	ReasonNoRoute            = "no_route"
	ReasonNotTLS             = "not_tls"
	ReasonVersion            = "no_common_version"
	ReasonHandshakeFailure   = "handshake_failure"
	ReasonClientCertRequired = "client_certificate_required"
	ReasonAlert              = "alert"
	ReasonPlainHTTPToTLS     = "plain_http_to_tls_port"
	ReasonRedirectRefused    = "redirect_refused"
	ReasonCancelled          = "cancelled"
	ReasonNotFound           = "not_found"
)

// ExitCode maps a result code to the process exit code. auth_required is 0
// here; the command turns it into 10 under --require-auth-ok.
func ExitCode(code string) int {
	switch code {
	case CodeOK, CodeAuthRequired:
		return 0
	case CodeInvalidTarget:
		return 2
	case CodeAuthMisconfigured:
		return 11
	case CodeDNSFailure:
		return 12
	case CodeConnectionUnreachable:
		return 13
	case CodeTimeout:
		return 14
	case CodeTLSCertificate:
		return 15
	case CodeTLSProtocol:
		return 16
	case CodeHTTPStatus:
		return 17
	case CodeNotMCP:
		return 18
	default:
		return 1
	}
}

// ExitAuthRequired is the exit code of auth_required under --require-auth-ok.
const ExitAuthRequired = 10

// Classify names the cause of a connection error by walking its chain
// (wrapped and joined) by type. The walk is outermost first and stops at
// the first decisive node, so an end-of-stream hides any incidental TLS
// error below it: a peer that closed during the handshake is unreachable,
// not a TLS failure.
func Classify(err error) Result {
	if err == nil {
		return Result{Code: CodeOK, Message: "MCP endpoint answered", Hint: hintOK}
	}
	if r, ok := walk(err); ok {
		return r
	}
	return Result{}
}

// classifyOr is Classify with a fallback for errors no type explains,
// chosen by the step that produced them.
func classifyOr(err error, fallback Result) Result {
	if r, ok := walk(err); ok {
		return r
	}
	if fallback.Message == "" {
		fallback.Message = clean(err.Error())
	}
	return fallback
}

func walk(err error) (Result, bool) {
	if err == nil {
		return Result{}, false
	}
	if r, ok := classifyNode(err); ok {
		return r, true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if r, ok := walk(e); ok {
				return r, true
			}
		}
	case interface{ Unwrap() error }:
		return walk(u.Unwrap())
	}
	return Result{}, false
}

func classifyNode(err error) (Result, bool) {
	// Sentinels are compared by identity, not errors.Is, so that only this
	// node is judged and the walk order decides.
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return closedResult(), true
	case context.DeadlineExceeded, os.ErrDeadlineExceeded:
		return timeoutResult(), true
	case context.Canceled:
		return Result{Code: CodeTimeout, Reason: ReasonCancelled, Message: "the probe was cancelled before an answer arrived", Hint: "run the probe again and let it finish"}, true
	}
	switch e := err.(type) {
	case syscall.Errno:
		return errnoResult(e)
	case *net.DNSError:
		if e.IsTimeout {
			r := timeoutResult()
			r.Message = fmt.Sprintf("DNS lookup of %s timed out", e.Name)
			return r, true
		}
		return Result{
			Code:    CodeDNSFailure,
			Reason:  dnsReason(e),
			Message: clean(e.Error()),
			Hint:    fmt.Sprintf("check the host name in the URL; `getent hosts %s` shows what this machine's resolver returns", e.Name),
		}, true
	case *tls.CertificateVerificationError:
		return certResult(e.Err, e.UnverifiedCertificates), true
	case x509.UnknownAuthorityError, x509.CertificateInvalidError, x509.HostnameError, x509.SystemRootsError:
		return certResult(e, nil), true
	case *x509.UnknownAuthorityError, *x509.CertificateInvalidError, *x509.HostnameError:
		return certResult(e, nil), true
	case tls.RecordHeaderError:
		return notTLSResult(), true
	case *tls.RecordHeaderError:
		return notTLSResult(), true
	case tls.AlertError:
		return alertResult(uint8(e)), true
	case *net.OpError:
		// crypto/tls reports an alert from the peer as an OpError whose
		// Op is "remote error" around its unexported alert type.
		if e.Op == "remote error" {
			if code, ok := alertCode(e.Err); ok {
				return alertResult(code), true
			}
		}
	}
	// Leaf errors that only say "timeout" (net/http's client timeout has no
	// Unwrap, only Timeout and Is).
	if t, ok := err.(interface{ Timeout() bool }); ok && t.Timeout() {
		if _, wraps := err.(interface{ Unwrap() error }); !wraps {
			return timeoutResult(), true
		}
	}
	return Result{}, false
}

// alertCode reads the numeric alert out of crypto/tls's unexported alert
// type; reflection keeps this a type check rather than a message match.
func alertCode(err error) (uint8, bool) {
	if err == nil {
		return 0, false
	}
	t := reflect.TypeOf(err)
	if t.PkgPath() != "crypto/tls" || t.Kind() != reflect.Uint8 {
		return 0, false
	}
	return uint8(reflect.ValueOf(err).Uint()), true
}

func errnoResult(e syscall.Errno) (Result, bool) {
	switch e {
	case syscall.ECONNREFUSED:
		return Result{Code: CodeConnectionUnreachable, Reason: ReasonRefused, Message: "connection refused: nothing is listening on that port", Hint: "check the port in the URL and that the server is running"}, true
	case syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED:
		r := closedResult()
		r.Reason = ReasonReset
		r.Message = "the peer reset the connection (" + e.Error() + ")"
		return r, true
	case syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EADDRNOTAVAIL, syscall.EHOSTDOWN:
		return Result{Code: CodeConnectionUnreachable, Reason: ReasonNoRoute, Message: "no route to the server (" + e.Error() + ")", Hint: "check the network path: VPN, firewall, or whether the address is reachable from this machine"}, true
	case syscall.ETIMEDOUT:
		return timeoutResult(), true
	}
	return Result{}, false
}

func dnsReason(e *net.DNSError) string {
	if e.IsNotFound {
		return ReasonNotFound
	}
	return ReasonOther
}

func closedResult() Result {
	return Result{
		Code:    CodeConnectionUnreachable,
		Reason:  ReasonClosed,
		Message: "the peer closed the connection before the exchange completed",
		Hint:    "something on the path drops this client (firewall, proxy, SNI or IP allow-list); compare with `openssl s_client -connect HOST:PORT -servername HOST`",
	}
}

func timeoutResult() Result {
	return Result{
		Code:    CodeTimeout,
		Message: "no answer within the time limit",
		Hint:    "check firewalls and VPN, or raise --timeout if the server is just slow",
	}
}

func notTLSResult() Result {
	return Result{
		Code:    CodeTLSProtocol,
		Reason:  ReasonNotTLS,
		Message: "the port answered the TLS ClientHello with something that is not TLS (often plain HTTP)",
		Hint:    "use http:// instead of https:// if the server has no TLS, or check the port number",
	}
}

// TLS alert numbers (RFC 8446 §6).
const (
	alertHandshakeFailure    = 40
	alertBadCertificate      = 42
	alertProtocolVersion     = 70
	alertInsufficientSec     = 71
	alertCertificateRequired = 116
)

func alertResult(code uint8) Result {
	name := tls.AlertError(code).Error()
	r := Result{Code: CodeTLSProtocol, Reason: ReasonAlert,
		Message: fmt.Sprintf("the server ended the TLS handshake with alert %d (%s)", code, name),
		Hint:    "the server refused this TLS client; its logs name the cause"}
	switch code {
	case alertProtocolVersion:
		r.Reason = ReasonVersion
		r.Message = fmt.Sprintf("no TLS version in common: the server answered alert %d (%s); mcpx requires TLS 1.2 or newer", code, name)
		r.Hint = "the server only offers an old TLS version: enable TLS 1.2 or 1.3 on the server"
	case alertHandshakeFailure, alertInsufficientSec:
		r.Reason = ReasonHandshakeFailure
		r.Message = fmt.Sprintf("no common TLS parameters: the server answered alert %d (%s)", code, name)
		r.Hint = "the server accepts no cipher suite or version this client offers: enable TLS 1.2+ with modern ciphers on the server"
	case alertCertificateRequired, alertBadCertificate:
		r.Reason = ReasonClientCertRequired
		r.Message = fmt.Sprintf("the server requires a client certificate (alert %d, %s)", code, name)
		r.Hint = "the server wants mutual TLS, which this probe does not send: ask the operator whether a client certificate is required"
	}
	return r
}

// certResult explains a certificate verification failure, keeping the
// verifier's own words in the message.
func certResult(err error, chain []*x509.Certificate) Result {
	r := Result{Code: CodeTLSCertificate, Reason: ReasonOther,
		Message: "certificate rejected: " + clean(err.Error()),
		Hint:    "inspect the chain in the tls step; fix the server's certificate"}
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		roots    x509.SystemRootsError
	)
	switch {
	case errors.As(err, &invalid):
		r.Reason = ReasonOther
		if invalid.Reason == x509.Expired && invalid.Cert != nil {
			now := time.Now()
			if now.Before(invalid.Cert.NotBefore) {
				r.Reason = ReasonNotYetValid
				r.Hint = fmt.Sprintf("the certificate is valid only from %s: check this machine's clock, or the server installed a certificate too early", invalid.Cert.NotBefore.UTC().Format(time.RFC3339))
			} else {
				r.Reason = ReasonExpired
				r.Hint = fmt.Sprintf("the certificate expired on %s: renew it on the server", invalid.Cert.NotAfter.UTC().Format(time.RFC3339))
			}
		}
	case errors.As(err, &hostname):
		r.Reason = ReasonHostnameMismatch
		names := certNames(hostname.Certificate)
		if names == "" {
			r.Hint = "the certificate names no host: the server needs a certificate for this host name"
		} else {
			r.Hint = "the certificate is for " + names + ": use a URL with one of those names, or fix the server's certificate"
		}
	case errors.As(err, &unknown), errors.As(err, &roots):
		r.Reason = ReasonUntrusted
		r.Hint = untrustedHint(chain)
	}
	return r
}

// untrustedHint tells a self-signed certificate, a chain that stops at a
// leaf (likely a missing intermediate) and an unknown CA apart. Whether the
// leaf's issuer is an intermediate cannot be known from here, so that hint
// names both fixes.
func untrustedHint(chain []*x509.Certificate) string {
	const caFix = "pass the CA with --ca-file (or tls.ca_file in config) or SSL_CERT_FILE"
	if len(chain) == 0 {
		return "the issuer is not trusted here: " + caFix
	}
	last := chain[len(chain)-1]
	issuer := clean(last.Issuer.CommonName)
	switch {
	case selfSigned(last) && len(chain) == 1:
		return "the certificate is self-signed: install a CA-issued certificate on the server, or " + caFix
	case selfSigned(last):
		return fmt.Sprintf("the chain ends at %q, a CA not trusted here: %s", clean(last.Subject.CommonName), caFix)
	case !last.IsCA:
		return fmt.Sprintf("the server sent no certificate for its issuer %q: if that is an intermediate, the server must serve the full chain; if it is a private CA, %s", issuer, caFix)
	default:
		return fmt.Sprintf("the issuer %q is not trusted here: %s", issuer, caFix)
	}
}

// selfSigned: issued by itself and signed by its own key (CheckSignatureFrom
// would also demand CA basic constraints, which self-signed leaves lack).
func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) &&
		c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature) == nil
}

func certNames(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	return clean(joinNames(names))
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

const hintOK = "healthy: add it with `mcpx servers add NAME URL` to use it through proxyd"
