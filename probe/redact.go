package probe

import (
	"encoding/json"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// redactedMark replaces every secret in output.
const redactedMark = "[redacted]"

// clean strips terminal control characters (C0, DEL, C1, including ESC)
// from text a server may have supplied; newlines and tabs become spaces so
// that every detail stays on one line.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			return ' '
		case unicode.IsControl(r), r == unicode.ReplacementChar:
			return -1
		case r == '\u2028' || r == '\u2029' || r == '\u200e' || r == '\u200f' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069'):
			// line separators and bidi overrides can disguise text
			return -1
		}
		return r
	}, s)
}

// tokenLikeParam reports query parameter names whose values are treated
// as secrets.
func tokenLikeParam(name string) bool {
	n := strings.ToLower(name)
	for _, frag := range []string{"token", "secret", "key", "pass", "pwd", "auth", "sig", "session", "code", "jwt", "bearer", "credential"} {
		if strings.Contains(n, frag) {
			return true
		}
	}
	return false
}

// redactor removes known secret values from output.
type redactor struct {
	secrets []string
}

// newRedactor collects the secrets of a probe: header values, the bearer
// token, URL userinfo and token-like query values.
func newRedactor(opts Options, target *url.URL) *redactor {
	r := &redactor{}
	for _, v := range opts.Headers {
		r.add(v)
		// "Bearer abc": also hide the credential alone
		if _, cred, ok := strings.Cut(v, " "); ok {
			r.add(cred)
		}
	}
	r.add(opts.BearerToken)
	if target != nil {
		if target.User != nil {
			r.add(target.User.Username())
			if p, ok := target.User.Password(); ok {
				r.add(p)
			}
		}
		// Both the raw and the decoded spelling of each value, since
		// either may be echoed back.
		for _, p := range strings.Split(target.RawQuery, "&") {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				continue
			}
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if !tokenLikeParam(name) {
				continue
			}
			r.add(v)
			if dv, err := url.QueryUnescape(v); err == nil {
				r.add(dv)
			}
			if dv, err := url.PathUnescape(v); err == nil {
				r.add(dv)
			}
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

func (r *redactor) add(s string) {
	s = strings.TrimSpace(s)
	// Very short values would blank out unrelated text; they are still
	// never printed on purpose, only not searched for.
	if len(s) < 3 {
		return
	}
	forms := []string{s, url.QueryEscape(s), url.PathEscape(s)}
	if b, err := json.Marshal(s); err == nil {
		forms = append(forms, strings.Trim(string(b), `"`))
	}
	for _, f := range forms {
		if !slices.Contains(r.secrets, f) {
			r.secrets = append(r.secrets, f)
		}
	}
}

// String removes secrets from s and strips control characters.
func (r *redactor) String(s string) string {
	s = clean(s)
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redactedMark)
	}
	return s
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

// RedactURL returns rawURL without userinfo and with the values of
// token-like query parameters replaced; an unparsable URL is returned
// only up to its host.
func RedactURL(rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" {
		return redactedMark
	}
	return redactParsedURL(u)
}

func redactParsedURL(u *url.URL) string {
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(redactedMark)
		b.WriteString("@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteString("?")
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if i > 0 {
				b.WriteString("&")
			}
			k, _, hasValue := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if hasValue && tokenLikeParam(name) {
				b.WriteString(k + "=" + redactedMark)
			} else {
				b.WriteString(p)
			}
		}
	}
	// fragments never reach the server; they are dropped from output
	return clean(b.String())
}
