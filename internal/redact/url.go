package redact

import (
	"net/url"
	"strings"
)

// secretParam reports whether a query parameter's value is treated as a
// credential, by its name.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, frag := range []string{"token", "secret", "key", "pass", "pwd", "auth", "sig", "session", "code", "jwt", "bearer", "credential", "assertion"} {
		if strings.Contains(n, frag) {
			return true
		}
	}
	return false
}

// URL makes a URL safe to print: userinfo becomes Mark, the values of
// token-like query parameters (secretParam) become Mark, the fragment is
// dropped (it never reaches a server) and the rest goes through Text. A
// string that does not parse as a URL with a host is replaced whole.
func URL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return Mark
	}
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(Mark)
		b.WriteString("@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteString("?")
		for i, p := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			k, _, hasValue := strings.Cut(p, "=")
			if hasValue && secretParam(unescape(k)) {
				b.WriteString(k + "=" + Mark)
			} else {
				b.WriteString(p)
			}
		}
	}
	return Text(b.String())
}

// URLSecrets are the credentials a URL carries, for Text: the userinfo and
// the values of token-like query parameters, raw and decoded (either
// spelling may be echoed back).
func URLSecrets(u *url.URL) []string {
	if u == nil {
		return nil
	}
	var out []string
	if u.User != nil {
		out = append(out, u.User.Username())
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !secretParam(unescape(k)) {
			continue
		}
		out = append(out, v)
		if dv, err := url.QueryUnescape(v); err == nil && dv != v {
			out = append(out, dv)
		}
		if dv, err := url.PathUnescape(v); err == nil && dv != v {
			out = append(out, dv)
		}
	}
	return out
}

func unescape(k string) string {
	if n, err := url.QueryUnescape(k); err == nil {
		return n
	}
	return k
}
