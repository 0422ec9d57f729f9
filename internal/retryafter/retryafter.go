// Package retryafter reads the Retry-After header (RFC 9110 section
// 10.2.3), the one parser for upstream connects and token requests.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Max caps a delay: a server asking for more is retried after an hour.
const Max = time.Hour

// Parse reads delay-seconds (digits only) or an HTTP date relative to
// now. Anything else, a date in the past and an empty value give 0.
func Parse(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(Max/time.Second) {
			return Max // too many digits to parse is still "a long time"
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now).Round(time.Second)
	}
	return min(max(d, 0), Max)
}

// FromResponse is Parse of a response's Retry-After, for 429 and 503
// answers only (where the header means "come back later").
func FromResponse(resp *http.Response, now time.Time) time.Duration {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0
	}
	return Parse(resp.Header.Get("Retry-After"), now)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
