package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
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
		class      Outcome
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
