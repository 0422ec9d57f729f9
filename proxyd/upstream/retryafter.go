package upstream

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/retryafter"
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
	if err == nil {
		if r, ok := req.Context().Value(retryAfterKey{}).(*retryAfter); ok {
			if d := retryafter.FromResponse(resp, time.Now()); d > 0 {
				r.set(d)
			}
		}
	}
	return resp, err
}
