package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"
)

// ErrNotFound is returned (wrapped) when an edit names a server that the
// file does not have.
var ErrNotFound = errors.New("server not found")

// ErrExists is returned (wrapped) when AddServer finds the name taken.
var ErrExists = errors.New("server already exists")

// Error locates a problem in the file:
//
//	config.yaml:7:5: unknown key "hedaers" in server "docs"; fix: did you mean "headers"?
//
// Line and Column are 1-based; zero when the value did not come from a file.
type Error struct {
	File         string
	Line, Column int
	Msg, Hint    string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// pos is a 1-based line and column in the file.
type pos struct{ line, col int }

func tokenPos(tk *token.Token) pos {
	if tk == nil || tk.Position == nil {
		return pos{}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

// fromYAMLError turns the library's error into an *Error that keeps its
// line and column. Its messages name Go types, so they are rephrased where
// the error type says what went wrong.
func fromYAMLError(file string, err error) *Error {
	e := &Error{File: file, Msg: err.Error()}
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := tokenPos(ye.GetToken())
		e.Line, e.Column = p.line, p.col
		e.Msg = ye.GetMessage()
	}
	var (
		syn *yaml.SyntaxError
		typ *yaml.TypeError
		unk *yaml.UnknownFieldError
		ovf *yaml.OverflowError
	)
	switch {
	case errors.As(err, &syn):
		e.Msg = "invalid YAML: " + syn.Message
		e.Hint = "check indentation (spaces, not tabs) and quoting around this position"
	case errors.As(err, &typ):
		e.Msg = "wrong type: " + typ.GetMessage()
		e.Hint = "see the configuration reference for the expected type of this key"
	case errors.As(err, &unk):
		e.Msg = unk.Message
		e.Hint = "remove the key or correct its spelling"
	case errors.As(err, &ovf):
		e.Msg = "number out of range"
		e.Hint = "use a smaller number"
	}
	return e
}

// joinErrors joins errs; one error is returned as is so that
// callers can errors.As it without unwrapping a join.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// YAMLError locates a decoding error of another YAML file mcpx reads
// (a probe targets file) the way config errors are located.
func YAMLError(file string, err error) *Error { return fromYAMLError(file, err) }
