package inbound

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// TooLarge answers a request whose body is over the limit; it writes a
// 413 in the shape the endpoint's clients understand.
type TooLarge func(w http.ResponseWriter, r *http.Request, limit int64)

// Bodies bounds every request body next sees: at most max bytes (larger
// ones are answered by tooLarge and the connection closed), read within
// timeout of the request's start (a slower one is dropped). The deadline
// is lifted once the body is read, so long calls and streams are not cut.
func Bodies(next http.Handler, max int64, timeout time.Duration, tooLarge TooLarge) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			tooLarge(w, r, max)
			return
		}
		rc := http.NewResponseController(w)
		// The deadline stays while the body is unread, including the
		// server's own discard after a refused request.
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		if r.ContentLength < 0 {
			// Chunked: its size is known only once read. Read it here, so a
			// body over the limit gets the 413 and not a parse error.
			b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
			switch {
			case err != nil:
				w.Header().Set("Connection", "close")
				http.Error(w, fmt.Sprintf("reading the request body: %v", err), http.StatusRequestTimeout)
				return
			case int64(len(b)) > max:
				w.Header().Set("Connection", "close")
				tooLarge(w, r, max)
				return
			}
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
			next.ServeHTTP(w, r)
			return
		}
		r.Body = &liftOnEOF{ReadCloser: r.Body, rc: rc}
		next.ServeHTTP(w, r)
	})
}

// liftOnEOF lifts the read deadline once the body has been read whole.
type liftOnEOF struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// Server returns an http.Server for handler with the header and keep-alive
// timeouts set, tracking connection states for l when it is not nil.
func Server(handler http.Handler, headerTimeout, idleTimeout time.Duration, l *Listener) *http.Server {
	s := &http.Server{Handler: handler, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	if l != nil {
		s.ConnState = l.ConnState
	}
	return s
}
