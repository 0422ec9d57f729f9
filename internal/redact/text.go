// Package redact is the one place mcpx removes credentials from what it
// prints, logs or stores: free text (Text), URLs (URL) and terminal
// control sequences (Control). Every output path goes through it.
package redact

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Mark replaces every credential.
const Mark = "[REDACTED]"

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
	"challenge": true, "challenges": true,
}

// Text makes s safe to print: terminal control sequences are removed
// (Control), every known secret is replaced in its raw, JSON-escaped and
// URL-escaped spellings, and so is anything that looks like a credential:
// bearer credentials, Authorization values, token-like parameters and JSON
// fields (raw, JSON- and URL-escaped), and JWT-looking strings. Known
// secrets shorter than 3 characters are not searched for (they would blank
// out unrelated text). Text(Text(s)) == Text(s).
func Text(s string, secrets ...string) string {
	if len(secrets) == 0 {
		return patterns(Control(s))
	}
	return textForms(s, spellings(secrets))
}

// Secrets is a set of known secret values (a daemon's configured header
// values, client secrets, environment values) with their spellings worked
// out once, for text redacted again and again.
type Secrets struct{ forms []string }

// NewSecrets prepares values for Secrets.Text.
func NewSecrets(values ...string) *Secrets { return &Secrets{forms: spellings(values)} }

// Text is Text(s, values...) for the set's values; a nil set knows none.
func (set *Secrets) Text(s string) string {
	if set == nil || len(set.forms) == 0 {
		return patterns(Control(s))
	}
	return textForms(s, set.forms)
}

func textForms(s string, forms []string) string {
	s = replaceAll(s, forms)
	if c := Control(s); c != s {
		// an escape sequence inside a secret hid it from the first pass
		s = replaceAll(c, forms)
	}
	return patterns(s)
}

// spellings are the forms a secret may take in text: raw, JSON-escaped,
// query- and path-escaped; longest first, so that a secret containing
// another is replaced whole.
func spellings(secrets []string) []string {
	var out []string
	add := func(f string) {
		if f != "" && !strings.Contains(Mark, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, sec := range secrets {
		sec = strings.TrimSpace(sec)
		if len(sec) < 3 {
			continue
		}
		add(sec)
		if j, err := json.Marshal(sec); err == nil {
			add(string(j[1 : len(j)-1]))
		}
		add(url.QueryEscape(sec))
		add(url.PathEscape(sec))
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func replaceAll(s string, forms []string) string {
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, Mark)
	}
	return s
}

// patterns replaces what looks like a credential.
func patterns(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	s = replaceJSONFields(jsonFieldRE, s)
	s = replaceJSONFields(jsonEscapedFieldRE, s)
	s = replaceJSONFields(jsonNestedFieldRE, s)
	s = paramRE.ReplaceAllString(s, "${1}"+Mark)
	s = quotedFieldRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := quotedFieldRE.FindStringSubmatch(m)
		q := sub[2][:1]
		return sub[1] + q + Mark + q
	})
	s = looseFieldRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := looseFieldRE.FindStringSubmatch(m)
		if sub[2] == Mark {
			return m
		}
		return sub[1] + Mark
	})
	s = secretHeaderRE.ReplaceAllString(s, "${1}"+Mark)
	s = authHeaderRE.ReplaceAllStringFunc(s, redactAuthHeader)
	s = bearerRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearerRE.FindStringSubmatch(m)
		if notCredentials[strings.ToLower(strings.TrimRight(sub[2], "="))] {
			return m
		}
		return sub[1] + Mark
	})
	return jwtRE.ReplaceAllString(s, Mark)
}

// errorCodeRE is a word code ("invalid_value", "too_small", "custom"): an
// error's "code" member (validation libraries, OAuth's own error
// responses), not an authorization code, which is random: long, with
// digits or capitals, and no underscore between lower-case words.
var errorCodeRE = regexp.MustCompile(`^(?:[a-z]{2,12}|[a-z]+(?:_[a-z]+)+)$`)

// replaceJSONFields redacts the values re finds, keeping a "code" member
// that holds a word code.
func replaceJSONFields(re *regexp.Regexp, s string) string {
	return re.ReplaceAllStringFunc(s, func(m string) string {
		sub := re.FindStringSubmatch(m)
		key := strings.ToLower(strings.TrimRight(sub[1], "\\\" :\t\r\n"))
		if strings.HasSuffix(key, `"code`) && len(sub[2]) <= 40 && errorCodeRE.MatchString(sub[2]) {
			return m
		}
		return sub[1] + Mark
	})
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
		if fields[0] == Mark || prose[strings.ToLower(fields[0])] {
			return m
		}
		return prefix + Mark
	default:
		if fields[1] == Mark {
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
		return prefix + fields[0] + " " + Mark
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
