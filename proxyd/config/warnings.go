package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
)

// Warnings lists problems that do not stop proxyd from starting but that
// the user should hear about: a CA file that cannot be read (checked now,
// not at parse time, because the file may appear later) and plain-HTTP
// URLs to other machines. Like Validate's errors they point into the file.
func (c *Config) Warnings() []*Error {
	var errs []*Error
	v := &validator{src: c.src, errs: &errs}
	if c.src != nil {
		v.file = c.src.file
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		sv := v.forServer(c, i)
		if s.Disabled {
			continue
		}
		if s.TLS != nil && s.TLS.CAFile != "" {
			if _, err := os.ReadFile(s.TLS.CAFile); err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				sv.add("tls.ca_file", fmt.Sprintf("%scannot read ca_file %q: %v", prefix(sv.where), s.TLS.CAFile, err), "point ca_file at a readable PEM file")
			}
		}
		if u, err := url.Parse(s.URL); err == nil && u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
			sv.add("url", prefix(sv.where)+"url uses plain http:// to another machine; calls and tokens travel unencrypted", "use https://")
		}
	}
	return errs
}

// tokenLikeParam matches query parameter names whose values are commonly
// credentials.
func tokenLikeParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "key", "secret", "pass", "auth", "sig", "code", "session", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactURL hides user information and token-like query values.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return Redacted
		}
		return raw
	}
	changed := false
	if u.User != nil {
		u.User = url.User(Redacted)
		changed = true
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			if tokenLikeParam(k) {
				for i := range vs {
					vs[i] = Redacted
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}
