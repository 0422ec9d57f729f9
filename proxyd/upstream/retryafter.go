package upstream

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"
)

// retryAfter carries a 429/503 Retry-After seen while connecting.
type retryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

func (r *retryAfter) set(d time.Duration) { r.mu.Lock(); r.d = d; r.mu.Unlock() }

func (r *retryAfter) get() time.Duration { r.mu.Lock(); defer r.mu.Unlock(); return r.d }

type retryAfterKey struct{}

func withRetryAfter(ctx context.Context, r *retryAfter) context.Context {
	return context.WithValue(ctx, retryAfterKey{}, r)
}

// retryAfterTransport notes Retry-After on 429 and 503 answers to requests
// whose context asks for it (the connect path).
type retryAfterTransport struct{ next http.RoundTripper }

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if r, ok := req.Context().Value(retryAfterKey{}).(*retryAfter); ok {
			if d := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
				r.set(d)
			}
		}
	}
	return resp, err
}

// parseRetryAfter reads delay-seconds or an HTTP date; capped at 1 hour.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := time.ParseDuration(v + "s"); err == nil && n >= 0 {
		d = n
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	if d < 0 {
		return 0
	}
	if d > time.Hour {
		d = time.Hour
	}
	return d
}
