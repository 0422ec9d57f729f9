package upstream

import (
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// describe shortens a connection error to what a person needs: mcp-go
// wraps transport failures twice ("failed to send request: failed to send
// request: Post ..."), so the innermost network error is named instead,
// still wrapping the original for errors.Is/As.
func describe(err error) error {
	if errors.Is(err, transport.ErrAuthorizationRequired) || errors.Is(err, transport.ErrOAuthAuthorizationRequired) {
		return &describedError{msg: "the server requires sign-in (HTTP 401)", err: err}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return &describedError{msg: fmt.Sprintf("cannot reach %s: %v", opTarget(op), op.Err), err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return &describedError{msg: fmt.Sprintf("%s %s: %v", ue.Op, redact.URL(ue.URL), ue.Err), err: err}
	}
	return err
}

func opTarget(op *net.OpError) string {
	if op.Addr != nil {
		return op.Addr.String()
	}
	return op.Net
}

type describedError struct {
	msg string
	err error
}

func (e *describedError) Error() string { return e.msg }
func (e *describedError) Unwrap() error { return e.err }
