// Package discovery finds how to authorize against a protected MCP server:
// the WWW-Authenticate challenge, RFC 9728 protected-resource metadata and
// RFC 8414 / OpenID Connect authorization server metadata, with per-server
// overrides, a cache and an HTTP client whose redirect policy suits
// fetching URLs that a remote server chose.
package discovery

import (
	"fmt"
	"strings"
)

// Challenge is one challenge of a WWW-Authenticate header (RFC 7235 §4.1).
// Params holds the auth-params with lower-cased names; a token68 value is
// stored under the empty name. The Bearer fields of RFC 6750 and RFC 9728
// are copied out for convenience.
type Challenge struct {
	Scheme           string
	Params           map[string]string
	ResourceMetadata string
	Scope            string
	Error            string
	ErrorDescription string
}

// SyntaxError reports the part of a header that could not be parsed. The
// challenges parsed before and after it are still returned.
type SyntaxError struct {
	Header string
	Offset int
	Reason string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("WWW-Authenticate: %s at offset %d", e.Reason, e.Offset)
}

// ParseWWWAuthenticate parses the values of one or more WWW-Authenticate
// header fields. It is tolerant: a malformed part is skipped up to the next
// comma, and the first such problem is returned as a *SyntaxError alongside
// every challenge that could be read.
func ParseWWWAuthenticate(values []string) ([]Challenge, error) {
	var out []Challenge
	var firstErr error
	for _, v := range values {
		cs, err := parseHeader(v)
		out = append(out, cs...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}

// BearerChallenge returns the first Bearer challenge, else the first DPoP
// challenge, or nil.
func BearerChallenge(cs []Challenge) *Challenge {
	for i := range cs {
		if strings.EqualFold(cs[i].Scheme, "bearer") {
			return &cs[i]
		}
	}
	// A server that takes only sender-constrained tokens challenges with
	// the DPoP scheme (RFC 9449 §7.1), with the same parameters.
	for i := range cs {
		if strings.EqualFold(cs[i].Scheme, "dpop") {
			return &cs[i]
		}
	}
	return nil
}

type parser struct {
	s   string
	i   int
	err *SyntaxError
}

func (p *parser) fail(reason string) {
	if p.err == nil {
		p.err = &SyntaxError{Header: p.s, Offset: p.i, Reason: reason}
	}
	// Resynchronise at the next list separator.
	for p.i < len(p.s) && p.s[p.i] != ',' {
		if p.s[p.i] == '"' {
			p.quoted()
			continue
		}
		p.i++
	}
}

func (p *parser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted-string starting at p.i (which holds '"') and
// returns its unescaped value. An unterminated string runs to the end.
func (p *parser) quoted() (string, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return b.String(), true
		case '\\':
			if p.i+1 < len(p.s) {
				b.WriteByte(p.s[p.i+1])
				p.i += 2
				continue
			}
		}
		b.WriteByte(c)
		p.i++
	}
	return b.String(), false
}

// token68At reads a token68 at p.i when it is the whole rest of the
// challenge (followed only by OWS and then a comma or the end).
func (p *parser) token68At() (string, bool) {
	j := p.i
	for j < len(p.s) && isToken68(p.s[j]) {
		j++
	}
	if j == p.i {
		return "", false
	}
	for j < len(p.s) && p.s[j] == '=' {
		j++
	}
	v := p.s[p.i:j]
	for j < len(p.s) && (p.s[j] == ' ' || p.s[j] == '\t') {
		j++
	}
	if j < len(p.s) && p.s[j] != ',' {
		return "", false
	}
	p.i = j
	return v, true
}

func parseHeader(s string) ([]Challenge, error) {
	p := &parser{s: s}
	var out []Challenge
	var cur *Challenge
	for {
		// Skip list separators and whitespace.
		for p.i < len(p.s) && (p.s[p.i] == ',' || p.s[p.i] == ' ' || p.s[p.i] == '\t') {
			p.i++
		}
		if p.i >= len(p.s) {
			break
		}
		start := p.i
		name := p.token()
		if name == "" {
			p.fail("expected a token")
			continue
		}
		p.ows()
		if p.i < len(p.s) && p.s[p.i] == '=' && cur != nil {
			// auth-param of the current challenge.
			p.i++
			p.ows()
			var val string
			if p.i < len(p.s) && p.s[p.i] == '"' {
				v, ok := p.quoted()
				if !ok {
					p.fail("unterminated quoted string")
				}
				val = v
			} else {
				val = p.token()
			}
			key := strings.ToLower(name)
			if _, dup := cur.Params[key]; !dup {
				cur.Params[key] = val
			}
			p.ows()
			if p.i < len(p.s) && p.s[p.i] != ',' {
				p.fail("expected a comma after a parameter")
			}
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '=' && cur == nil {
			p.i = start
			p.fail("parameter before any auth-scheme")
			continue
		}
		// A new challenge: name is its scheme.
		out = append(out, Challenge{Scheme: name, Params: map[string]string{}})
		cur = &out[len(out)-1]
		if p.i < len(p.s) && p.s[p.i] != ',' {
			if t, ok := p.token68At(); ok {
				cur.Params[""] = t
			}
		}
	}
	for i := range out {
		c := &out[i]
		c.ResourceMetadata = c.Params["resource_metadata"]
		c.Scope = c.Params["scope"]
		c.Error = c.Params["error"]
		c.ErrorDescription = c.Params["error_description"]
	}
	if p.err != nil {
		return out, p.err
	}
	return out, nil
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken68(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~+/", c) >= 0
}
