package proxyd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// handler is a control API endpoint; a returned error becomes the one
// error shape.
type handler func(w http.ResponseWriter, r *http.Request) error

// apiError is an error with the HTTP status and code it answers with.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &apiError{http.StatusNotFound, api.CodeNotFound, fmt.Sprintf(format, a...)}
}

func conflict(format string, a ...any) error {
	return &apiError{http.StatusConflict, api.CodeConflict, fmt.Sprintf(format, a...)}
}

func invalidConfig(format string, a ...any) error {
	return &apiError{http.StatusUnprocessableEntity, api.CodeInvalidConfig, fmt.Sprintf(format, a...)}
}

func authRequired(format string, a ...any) error {
	return &apiError{http.StatusUnauthorized, api.CodeAuthRequired, fmt.Sprintf(format, a...)}
}

func unavailable(format string, a ...any) error {
	return &apiError{http.StatusServiceUnavailable, api.CodeUnavailable, fmt.Sprintf(format, a...)}
}

// writeError answers with the one error shape.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, api.CodeInternal, err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ae.status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: ae.code, Message: ae.msg}})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// decode reads a JSON request body into v; unknown fields are refused.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("invalid request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid request body: data after the JSON value; send exactly one JSON object")
	}
	return nil
}

// ndjson writes a stream of JSON values, one per line, each flushed as it
// is sent; safe for concurrent senders. Once it exists the status is 200:
// later failures travel as events of the stream.
type ndjson struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	enc *json.Encoder
	err error
}

func newNDJSON(w http.ResponseWriter) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	n := &ndjson{w: w, enc: json.NewEncoder(w)}
	n.flush()
	return n
}

// send writes v; after a failed write (the reader went away) it returns
// that error and writes nothing more.
func (n *ndjson) send(v any) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	if n.err = n.enc.Encode(v); n.err == nil {
		n.flush()
	}
	return n.err
}

func (n *ndjson) flush() {
	if f, ok := n.w.(http.Flusher); ok {
		f.Flush()
	}
}
