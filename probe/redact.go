package probe

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// clean makes server-supplied text safe for a one-line detail: terminal
// control sequences removed (redact.Control), newlines and tabs turned
// into spaces.
func clean(s string) string { return oneLine(redact.Control(s)) }

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// redactor removes the secrets of one probe from its output.
type redactor struct {
	secrets []string
}

// newRedactor collects the secrets of a probe: header values, the bearer
// token, URL userinfo and token-like query values.
func newRedactor(opts Options, target *url.URL) *redactor {
	r := &redactor{secrets: redact.URLSecrets(target)}
	for _, v := range opts.Headers {
		r.secrets = append(r.secrets, v)
		// "Bearer abc": also hide the credential alone
		if _, cred, ok := strings.Cut(v, " "); ok {
			r.secrets = append(r.secrets, cred)
		}
	}
	r.secrets = append(r.secrets, opts.BearerToken)
	return r
}

// String makes s safe to print on one line.
func (r *redactor) String(s string) string {
	return oneLine(redact.Text(s, r.secrets...))
}

// value returns a copy of v (anything JSON can encode) with every string
// redacted; the result is plain maps, slices and scalars.
func (r *redactor) value(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil
	}
	return r.walk(generic)
}

func (r *redactor) walk(v any) any {
	switch t := v.(type) {
	case string:
		return r.String(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[r.String(k)] = r.walk(x)
		}
		return out
	case []any:
		for i, x := range t {
			t[i] = r.walk(x)
		}
		return t
	default:
		return v
	}
}
