package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

func certValid(from, to time.Time) *x509.Certificate {
	return &x509.Certificate{NotBefore: from, NotAfter: to, DNSNames: []string{"mcp.example.test"}}
}

func TestClassify(t *testing.T) {
	now := time.Now()
	expired := certValid(now.Add(-48*time.Hour), now.Add(-time.Hour))
	future := certValid(now.Add(time.Hour), now.Add(48*time.Hour))
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://mcp.example.test/mcp", Err: err} }
	dial := func(errno syscall.Errno) error {
		return urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)})
	}
	certErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}

	tests := []struct {
		name       string
		err        error
		code       string
		reason     string
		wantNoHint bool
	}{
		{"nil is ok", nil, CodeOK, "", false},
		{"refused", dial(syscall.ECONNREFUSED), CodeConnectionUnreachable, ReasonRefused, false},
		{"reset", dial(syscall.ECONNRESET), CodeConnectionUnreachable, ReasonReset, false},
		{"no route", dial(syscall.EHOSTUNREACH), CodeConnectionUnreachable, ReasonNoRoute, false},
		{"network unreachable", dial(syscall.ENETUNREACH), CodeConnectionUnreachable, ReasonNoRoute, false},
		{"connect timed out", dial(syscall.ETIMEDOUT), CodeTimeout, "", false},
		{"dial deadline", urlErr(&net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}), CodeTimeout, "", false},
		{"context deadline wrapped", fmt.Errorf("initialize: %w", context.DeadlineExceeded), CodeTimeout, "", false},
		{"cancelled", fmt.Errorf("initialize: %w", context.Canceled), CodeTimeout, ReasonCancelled, false},
		{"dns not found", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.test", IsNotFound: true}}), CodeDNSFailure, ReasonNotFound, false},
		{"dns timeout", &net.DNSError{Err: "i/o timeout", Name: "x.test", IsTimeout: true}, CodeTimeout, "", false},
		{"dns other", &net.DNSError{Err: "server misbehaving", Name: "x.test"}, CodeDNSFailure, ReasonOther, false},
		{"untrusted", urlErr(certErr), CodeTLSCertificate, ReasonUntrusted, false},
		{"expired", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: expired, Reason: x509.Expired}}, CodeTLSCertificate, ReasonExpired, false},
		{"not yet valid", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: future, Reason: x509.Expired}}, CodeTLSCertificate, ReasonNotYetValid, false},
		{"other invalid", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Cert: future, Reason: x509.NotAuthorizedToSign}}, CodeTLSCertificate, ReasonOther, false},
		{"hostname", &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: expired, Host: "other.test"}}, CodeTLSCertificate, ReasonHostnameMismatch, false},
		{"bare x509 hostname", x509.HostnameError{Certificate: expired, Host: "other.test"}, CodeTLSCertificate, ReasonHostnameMismatch, false},
		{"record header", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), CodeTLSProtocol, ReasonNotTLS, false},
		{"alert version", tls.AlertError(70), CodeTLSProtocol, ReasonVersion, false},
		{"alert handshake", fmt.Errorf("handshake: %w", tls.AlertError(40)), CodeTLSProtocol, ReasonHandshakeFailure, false},
		{"alert cert required", tls.AlertError(116), CodeTLSProtocol, ReasonClientCertRequired, false},
		{"alert other", tls.AlertError(80), CodeTLSProtocol, ReasonAlert, false},
		{"eof during handshake", urlErr(io.EOF), CodeConnectionUnreachable, ReasonClosed, false},
		{"unexpected eof", &transport.Error{Err: urlErr(io.ErrUnexpectedEOF)}, CodeConnectionUnreachable, ReasonClosed, false},
		// An end-of-stream hides an incidental TLS error kept below or
		// beside it: the peer closed, that is the cause.
		{"eof before tls error (wrapped)", fmt.Errorf("read: %w: %w", io.EOF, certErr), CodeConnectionUnreachable, ReasonClosed, false},
		{"eof before tls error (joined)", errors.Join(io.EOF, tls.RecordHeaderError{}), CodeConnectionUnreachable, ReasonClosed, false},
		{"tls error in a joined list", errors.Join(errors.New("attempt 1"), certErr), CodeTLSCertificate, ReasonUntrusted, false},
		{"mcp transport wrapping", &transport.Error{Err: dial(syscall.ECONNREFUSED)}, CodeConnectionUnreachable, ReasonRefused, false},
		{"net/http client timeout", urlErr(&timeoutOnly{}), CodeTimeout, "", false},
		{"unknown", errors.New("something else"), "", "", true},
		{"message text is not a type", errors.New("x509: certificate signed by unknown authority"), "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got.Code != tt.code || got.Reason != tt.reason {
				t.Fatalf("Classify = %s/%s, want %s/%s (%+v)", got.Code, got.Reason, tt.code, tt.reason, got)
			}
			if !tt.wantNoHint && (got.Hint == "" || got.Message == "") {
				t.Fatalf("missing message or hint: %+v", got)
			}
		})
	}
}

// timeoutOnly is shaped like net/http's client timeout error: Timeout and
// no Unwrap.
type timeoutOnly struct{}

func (*timeoutOnly) Error() string   { return "Client.Timeout exceeded" }
func (*timeoutOnly) Timeout() bool   { return true }
func (*timeoutOnly) Temporary() bool { return true }

func TestCertificateKeepsVerifierWords(t *testing.T) {
	err := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	got := Classify(err)
	want := x509.UnknownAuthorityError{}.Error()
	if got.Message != "certificate rejected: "+want {
		t.Fatalf("message %q does not keep the verifier's words %q", got.Message, want)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		code string
		want int
	}{
		{CodeOK, 0}, {CodeAuthRequired, 0}, {CodeInvalidTarget, 2}, {CodeAuthMisconfigured, 11},
		{CodeDNSFailure, 12}, {CodeConnectionUnreachable, 13}, {CodeTimeout, 14},
		{CodeTLSCertificate, 15}, {CodeTLSProtocol, 16}, {CodeHTTPStatus, 17}, {CodeNotMCP, 18},
		{"something new", 1},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.code); got != tt.want {
			t.Errorf("ExitCode(%q) = %d, want %d", tt.code, got, tt.want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("x", 0)
	f.Add("eof", 1)
	f.Fuzz(func(t *testing.T, msg string, kind int) {
		var err error = errors.New(msg)
		switch kind % 4 {
		case 1:
			err = errors.Join(err, io.EOF)
		case 2:
			err = fmt.Errorf("%s: %w", msg, tls.AlertError(uint8(kind)))
		case 3:
			err = &net.DNSError{Err: msg, Name: msg}
		}
		r := Classify(err)
		if r.Code != "" && r.Hint == "" {
			t.Fatalf("classified without hint: %+v", r)
		}
	})
}
