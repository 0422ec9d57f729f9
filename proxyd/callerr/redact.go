package callerr

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Redacted replaces every credential Redact removes.
const Redacted = "[REDACTED]"

// secretKeys are parameter and field names whose values are credentials.
const secretKeys = `access_token|refresh_token|id_token|client_secret|code|code_verifier|token|api_key|apikey|password|assertion|client_assertion|accesstoken|refreshtoken|idtoken|clientsecret|codeverifier`

// namedSecrets are the unambiguous names, safe to match in looser
// syntaxes (YAML, Python reprs) where "code" or "token" would catch prose.
const namedSecrets = `access_token|refresh_token|id_token|client_secret|code_verifier|api_key|apikey|password|client_assertion|accesstoken|refreshtoken|idtoken|clientsecret|codeverifier`

var (
	// JSON fields with string values. The value runs to its closing quote,
	// escapes included (a credential may hold \" or \\), in raw JSON
	// and in JSON escaped once inside a JSON string (\"access_token\":\"...\");
	// deeper nesting is cut at the first backslash. Numeric values (a
	// JSON-RPC "code") are kept.
	jsonFieldRE        = regexp.MustCompile(`(?i)((?:^|[^\\])"(?:` + secretKeys + `|authorization)"\s*:\s*")((?:[^"\\]|\\.)+)`)
	jsonEscapedFieldRE = regexp.MustCompile(`(?i)((?:^|[^\\])\\"(?:` + secretKeys + `|authorization)\\"\s*:\s*\\")((?:[^"\\]|\\\\\\"|\\\\\\\\|\\\\[^"\\]|\\[^"\\])+)`)
	jsonNestedFieldRE  = regexp.MustCompile(`(?i)(\\+"(?:` + secretKeys + `|authorization)\\+"\s*:\s*\\+")([^"\\]+)`)
	// Query and form parameters, raw or URL-escaped (%3Fcode%3D...).
	paramRE = regexp.MustCompile(`(?i)((?:^|[^A-Za-z0-9_%]|%[0-9A-Fa-f]{2})(?:` + secretKeys + `)(?:=|%3D))((?:[^&\s"'#%<>\\]|%(?:[013-9A-Fa-f][0-9A-Fa-f]|2[0-57-9A-Fa-f]))+)`)
	// Authorization header values: an optional scheme and a credential.
	authHeaderRE = regexp.MustCompile(`(?i)(\bauthorization\s*[:=]\s*)([^\r\n"',;\\]+)`)
	// Bearer credentials anywhere, with a space, a URL-escaped space or a plus.
	bearerRE = regexp.MustCompile(`(?i)(\bbearer(?:\s+|%20|\+))([A-Za-z0-9\-._~+/]+=*)`)
	// Single-quoted keys (Python dict reprs): 'access_token': '...', with
	// the value in either quote and escapes included; a value cut short
	// (no closing quote) runs to the end of the text.
	quotedFieldRE = regexp.MustCompile(`(?i)('(?:` + namedSecrets + `)'\s*:\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?)`)
	// YAML and log style: access_token: ...
	looseFieldRE = regexp.MustCompile(`(?i)(\b(?:` + namedSecrets + `)\s*:\s+)([^\s,;'"\\]+)`)
	// Other credential-bearing headers.
	secretHeaderRE = regexp.MustCompile(`(?i)(\b(?:x-api-key|api-key|proxy-authorization|set-cookie|cookie)\s*:\s*)([^\r\n"\\]+)`)
	// JWT-looking strings anywhere.
	jwtRE = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
)

// notCredentials are words that follow "Bearer" in prose and challenges
// (`Bearer realm="..."`, "bearer token required"), kept for readability.
var notCredentials = map[string]bool{
	"realm": true, "error": true, "error_description": true, "scope": true, "resource_metadata": true,
	"token": true, "tokens": true, "auth": true, "authentication": true, "authorization": true,
	"required": true, "missing": true, "invalid": true, "expired": true, "header": true, "scheme": true,
}

// Redact removes credentials from s: bearer credentials, Authorization
// values, token-like parameters and JSON fields (raw, JSON- and
// URL-escaped), and JWT-looking strings. Redact(Redact(s)) == Redact(s).
func Redact(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	s = jsonFieldRE.ReplaceAllString(s, "${1}"+Redacted)
	s = jsonEscapedFieldRE.ReplaceAllString(s, "${1}"+Redacted)
	s = jsonNestedFieldRE.ReplaceAllString(s, "${1}"+Redacted)
	s = paramRE.ReplaceAllString(s, "${1}"+Redacted)
	s = quotedFieldRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := quotedFieldRE.FindStringSubmatch(m)
		q := sub[2][:1]
		return sub[1] + q + Redacted + q
	})
	s = looseFieldRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := looseFieldRE.FindStringSubmatch(m)
		if sub[2] == Redacted {
			return m
		}
		return sub[1] + Redacted
	})
	s = secretHeaderRE.ReplaceAllString(s, "${1}"+Redacted)
	s = authHeaderRE.ReplaceAllStringFunc(s, redactAuthHeader)
	s = bearerRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearerRE.FindStringSubmatch(m)
		if notCredentials[strings.ToLower(strings.TrimRight(sub[2], "="))] {
			return m
		}
		return sub[1] + Redacted
	})
	return jwtRE.ReplaceAllString(s, Redacted)
}

// prose are words after "Authorization:" in messages rather than headers.
var prose = map[string]bool{
	"required": true, "missing": true, "invalid": true, "expired": true, "failed": true, "denied": true,
	"header": true, "error": true, "is": true, "was": true, "not": true, "pending": true,
}

// triggers contains a substring of every pattern Redact looks for, so text
// without any of them skips the regular expressions.
var triggers = []string{"bearer", "authorization", "token", "code", "secret", "key", "password", "assertion", "eyj", "cookie"}

func mayHoldSecret(s string) bool {
	lower := strings.ToLower(s)
	for _, t := range triggers {
		if strings.Contains(lower, t) {
			return true
		}
	}
	return false
}

// redactAuthHeader keeps the scheme of "Authorization: <scheme> <credential>"
// and replaces the rest; a bare value is replaced whole.
func redactAuthHeader(m string) string {
	sub := authHeaderRE.FindStringSubmatch(m)
	prefix, value := sub[1], sub[2]
	fields := strings.Fields(value)
	switch {
	case len(fields) == 0:
		return m
	case len(fields) == 1:
		if fields[0] == Redacted || prose[strings.ToLower(fields[0])] {
			return m
		}
		return prefix + Redacted
	default:
		if fields[1] == Redacted {
			return m
		}
		if prose[strings.ToLower(fields[0])] {
			// prose such as "authorization: required for this server"
			return m
		}
		if !authSchemes[strings.ToLower(fields[0])] && !tokenLike(fields[1]) {
			// prose such as "authorization: sign in again: mcpx login docs"
			return m
		}
		return prefix + fields[0] + " " + Redacted
	}
}

// authSchemes are HTTP authentication schemes: what follows one is a
// credential whatever it looks like.
var authSchemes = map[string]bool{
	"bearer": true, "basic": true, "digest": true, "token": true, "negotiate": true, "ntlm": true,
	"dpop": true, "mac": true, "hoba": true, "mutual": true, "apikey": true, "aws4-hmac-sha256": true,
}

// tokenLike: at least 8 characters of the token68 alphabet (RFC 7235).
func tokenLike(s string) bool {
	if len(s) < 8 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-._~+/=", r):
		default:
			return false
		}
	}
	return true
}

// StripControl removes terminal control characters from server-supplied
// text: escape sequences (CSI, OSC and others), C0 controls except tab and
// newline, DEL, C1 controls and bidirectional overrides. Invalid UTF-8 is
// replaced.
func StripControl(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b:
			i += escapeLen(s[i:])
			continue
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			// dropped
		case (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f:
			// dropped: they reorder what the terminal shows
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c == 0x7f || (c < 0x20 && c != '\t' && c != '\n') {
			return false
		}
	}
	return true
}

// escapeLen is the length of the escape sequence at the start of s (which
// begins with ESC), including the ESC.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[': // CSI: parameters and intermediates, then a final byte 0x40-0x7e
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
			if s[i] < 0x20 || s[i] > 0x7e {
				return i // malformed: drop what was read so far
			}
		}
		return len(s)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: until BEL or ST
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	default: // two-byte sequence
		return 2
	}
}
