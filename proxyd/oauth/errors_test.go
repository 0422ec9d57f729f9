package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func retrieveErr(status int, code, desc string, header http.Header) error {
	if header == nil {
		header = http.Header{}
	}
	return &oauth2.RetrieveError{Response: &http.Response{StatusCode: status, Header: header}, ErrorCode: code, ErrorDescription: desc}
}

func TestClassifyRefreshError(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		class      string
		terminal   bool
		retryAfter time.Duration
	}{
		{"invalid_grant", retrieveErr(400, "invalid_grant", "", nil), OutcomeInvalidGrant, true, 0},
		{"invalid_client", retrieveErr(401, "invalid_client", "", nil), OutcomeInvalidClient, true, 0},
		{"unauthorized_client", retrieveErr(400, "unauthorized_client", "", nil), OutcomeUnauthorizedClient, true, 0},
		{"unsupported_grant_type", retrieveErr(400, "unsupported_grant_type", "", nil), OutcomeUnsupportedGrantType, true, 0},
		{"invalid_scope", retrieveErr(400, "invalid_scope", "", nil), OutcomeInvalidScope, true, 0},
		{"server_error code", retrieveErr(400, "server_error", "", nil), OutcomeServerError, false, 0},
		{"temporarily_unavailable", retrieveErr(503, "temporarily_unavailable", "", nil), OutcomeTemporarilyUnavailable, false, 0},
		{"bare 502", retrieveErr(502, "", "", nil), OutcomeServerError, false, 0},
		{"429 seconds", retrieveErr(429, "", "", http.Header{"Retry-After": {"12"}}), OutcomeRateLimited, false, 12 * time.Second},
		{"429 with a code", retrieveErr(429, "invalid_request", "", nil), OutcomeRateLimited, false, 0},
		{"slow_down", retrieveErr(400, "slow_down", "", nil), OutcomeRateLimited, false, 0},
		{"invalid_request", retrieveErr(400, "invalid_request", "", nil), OutcomeOther, false, 0},
		{"code only in a text/html JSON body", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400, Header: http.Header{}}, Body: []byte(`{"error":"invalid_grant"}`)}, OutcomeInvalidGrant, true, 0},
		{"wrapped", fmt.Errorf("refresh: %w", retrieveErr(400, "invalid_grant", "", nil)), OutcomeInvalidGrant, true, 0},
		{"deadline", context.DeadlineExceeded, OutcomeNetwork, false, 0},
		{"refused", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, OutcomeNetwork, false, 0},
		{"dns", &net.DNSError{Err: "no such host", Name: "x"}, OutcomeNetwork, false, 0},
		{"plain", errors.New("oauth2: cannot parse json"), OutcomeOther, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClassifyRefreshError(tt.err, true)
			if got.Class != tt.class || got.Terminal != tt.terminal || got.RetryAfter != tt.retryAfter {
				t.Fatalf("got %+v", got)
			}
			if got.Msg == "" || !errors.Is(got, tt.err) && !errors.Is(got.Err, tt.err) {
				t.Fatalf("msg %q / cause lost", got.Msg)
			}
		})
	}
	if ClassifyRefreshError(nil, false) != nil {
		t.Fatal("nil error classified")
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"5", 5 * time.Second}, {"-1", 0}, {"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	const sec = `rt_A+b/c=d"e`
	tests := []struct {
		name, in string
		secrets  []string
		gone     []string
		keep     []string
	}{
		{"raw", "token " + sec + " rejected", []string{sec}, []string{sec}, []string{"rejected"}},
		{"url-escaped", "refresh=" + url.QueryEscape(sec), []string{sec}, []string{url.QueryEscape(sec)}, nil},
		{"json-escaped", `{"x":"rt_A+b/c=d\"e"}`, []string{sec}, []string{`rt_A+b/c=d\"e`}, nil},
		{"form field", "grant_type=refresh_token&refresh_token=abc123&client_id=c1", nil, []string{"abc123"}, []string{"client_id=c1", "grant_type=refresh_token"}},
		{"json field", `{"access_token":"at-xyz","token_type":"Bearer"}`, nil, []string{"at-xyz"}, []string{"token_type"}},
		{"code in a URL", "http://127.0.0.1/callback?code=c0de&state=s", nil, []string{"c0de"}, []string{"state=s"}},
		{"authorization header", "Authorization: Bearer eyJhbGciOi.x.y", nil, []string{"eyJhbGciOi"}, []string{"Authorization"}},
		{"basic header", "Authorization: Basic Y2xpZW50OnNlY3JldA==", nil, []string{"Y2xpZW50OnNlY3JldA"}, nil},
		{"client secret", "client_secret=hunter22&x=1", nil, []string{"hunter22"}, []string{"x=1"}},
		{"short secrets ignored", "abc", []string{"ab"}, nil, []string{"abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Redact(tt.in, tt.secrets...)
			for _, g := range tt.gone {
				if strings.Contains(out, g) {
					t.Errorf("%q still in %q", g, out)
				}
			}
			for _, k := range tt.keep {
				if !strings.Contains(out, k) {
					t.Errorf("%q lost from %q", k, out)
				}
			}
		})
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("refresh_token=abc&x=1", "abc")
	f.Add(`{"access_token":"x\"y"}`, `x"y`)
	f.Fuzz(func(t *testing.T, s, secret string) {
		if len(secret) < 4 || strings.Contains(redacted, secret) {
			return
		}
		if out := Redact(s+secret+s, secret); strings.Contains(out, secret) {
			t.Fatalf("secret %q survived in %q", secret, out)
		}
	})
}
