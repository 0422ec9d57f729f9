package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	const secret = "s3cr3tV4lue_xyz"
	const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl"
	tests := []struct {
		name string
		in   string
		keep string // must survive
	}{
		{"bearer", "Authorization: Bearer " + secret, "Authorization: Bearer [REDACTED]"},
		{"bearer lower case in prose", "sent bearer " + secret + " upstream", "sent bearer [REDACTED] upstream"},
		{"bearer url-escaped", "h=Bearer%20" + secret, "Bearer%20[REDACTED]"},
		{"authorization other scheme", "authorization: token " + secret, "authorization: token [REDACTED]"},
		{"authorization basic", "Authorization: Basic " + secret + "==", "Authorization: Basic [REDACTED]"},
		{"authorization bare value", "Authorization=" + secret, "Authorization=[REDACTED]"},
		{"authorization custom scheme", "Authorization: Custom " + secret, "Authorization: Custom [REDACTED]"},
		{"json camelCase", `{"accessToken":"` + secret + `","refreshToken":"` + secret + `"}`, `"accessToken":"[REDACTED]","refreshToken":"[REDACTED]"`},
		{"python repr", `{'access_token': '` + secret + `', 'expires_in': 3600}`, `'access_token': '[REDACTED]', 'expires_in': 3600`},
		{"yaml style", "refresh_token: " + secret + "\nexpires: 1h", "refresh_token: [REDACTED]\nexpires: 1h"},
		{"api key header", "X-Api-Key: " + secret, "X-Api-Key: [REDACTED]"},
		{"cookie header", "Cookie: session=" + secret, "Cookie: [REDACTED]"},
		{"code in prose is kept", "JSON-RPC error code: -32603", "JSON-RPC error code: -32603"},
		{"authorization in prose is kept", "authorization: sign in again: mcpx login docs", "authorization: sign in again: mcpx login docs"},
		{"query access_token", "GET https://x/cb?access_token=" + secret + "&state=ok", "access_token=[REDACTED]&state=ok"},
		{"query code", "redirect ?code=" + secret + "&state=abc", "code=[REDACTED]&state=abc"},
		{"form refresh_token", "grant_type=refresh_token&refresh_token=" + secret, "grant_type=refresh_token&refresh_token=[REDACTED]"},
		{"form client_secret", "client_id=app&client_secret=" + secret, "client_id=app&client_secret=[REDACTED]"},
		{"url-escaped param", "next=%2Fcb%3Fcode%3D" + secret + "%26state%3Dok", "code%3D[REDACTED]%26state%3Dok"},
		{"url-escaped percent value", "next=access_token%3D" + secret + "%2F" + secret + "%26x", "access_token%3D[REDACTED]%26x"},
		{"json field", `{"access_token":"` + secret + `","token_type":"Bearer"}`, `"access_token":"[REDACTED]"`},
		{"json field spaced", `{"refresh_token" : "` + secret + `"}`, `"refresh_token" : "[REDACTED]"`},
		{"json escaped in string", `"body":"{\"id_token\":\"` + secret + `\"}"`, `\"id_token\":\"[REDACTED]\"`},
		{"json authorization header", `{"Authorization":"Bearer ` + secret + `"}`, `"Authorization":"[REDACTED]"`},
		{"json value with an escaped quote", `{"password":"x\"` + secret + `","user":"me"}`, `"password":"[REDACTED]","user":"me"`},
		{"json value with an escaped backslash", `{"client_secret":"x\\` + secret + `"}`, `"client_secret":"[REDACTED]"}`},
		{"json value with a unicode escape", `{"access_token":"\u0041` + secret + `"}`, `"access_token":"[REDACTED]"}`},
		{"json escaped in string, inner quote", `"body":"{\"password\":\"x\\\"` + secret + `\",\"u\":1}"`, `\"password\":\"[REDACTED]\",\"u\":1}`},
		{"json escaped in string, inner backslash", `"body":"{\"password\":\"x\\\\` + secret + `\"}"`, `\"password\":\"[REDACTED]\"}`},
		{"json nested twice", `"a":"{\"b\":\"{\\\"refresh_token\\\":\\\"` + secret + `\\\"}\"}"`, `refresh_token\\\":\\\"[REDACTED]`},
		{"python repr, double-quoted value", `{'password': "it's` + secret + `", 'n': 1}`, `'password': "[REDACTED]", 'n': 1`},
		{"python repr, escaped quote", `{'password': 'a\'b"` + secret + `', 'n': 1}`, `'password': '[REDACTED]', 'n': 1`},
		{"python repr cut short", `{'password': 'hunter2` + secret, `'password': '[REDACTED]'`},
		{"json value cut short", `{"client_secret":"ab\"` + secret, `"client_secret":"[REDACTED]`},
		{"json numeric code kept", `{"error":{"code":-32099,"message":"x"}}`, `"code":-32099`},
		{"json word code kept", `[{"code":"invalid_value","path":["x"]}]`, `"code":"invalid_value"`},
		{"json word code kept, escaped", `"text":"{\"code\":\"too_small\"}"`, `\"code\":\"too_small\"`},
		{"json code holding a credential", `{"code":"` + secret + `","state":"abc"}`, `"code":"[REDACTED]","state":"abc"`},
		{"json code of capitals", `{"code":"AbCdEfGhIjKlMnOp"}`, `"code":"[REDACTED]"`},
		{"json code of lower-case letters", `{"code":"qwhzkvmtrplsbnxa"}`, `"code":"[REDACTED]"`},
		{"json short word code kept", `{"code":"custom"}`, `"code":"custom"`},
		{"json code_verifier of a word", `{"code_verifier":"plainwords"}`, `"code_verifier":"[REDACTED]"`},
		{"jwt anywhere", "token was " + jwt + " ok", "token was [REDACTED] ok"},
		{"challenge in prose kept", "Bearer challenge (resource_metadata)", "Bearer challenge (resource_metadata)"},
		{"challenge kept", `WWW-Authenticate: Bearer realm="mcp", resource_metadata="https://x/.well-known"`, `Bearer realm="mcp"`},
		{"error_code not a code param", "error_code=E42", "error_code=E42"},
		{"plain text", "request failed with status 502", "request failed with status 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Text(tt.in)
			if strings.Contains(got, secret) || strings.Contains(got, jwt) {
				t.Errorf("Text(%q) = %q: secret survived", tt.in, got)
			}
			if !strings.Contains(got, tt.keep) {
				t.Errorf("Text(%q) = %q, want it to contain %q", tt.in, got, tt.keep)
			}
			if again := Text(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{
		"Authorization: Bearer abc.def", `{"access_token":"x"}`, "code=1&state=2", "a%3Daccess_token%3Dq",
		`\"refresh_token\":\"z\"`, "bearer%20tok", "eyJabcd.eyJabcd.sig",
	} {
		f.Add(s, "tok3nValue")
	}
	f.Fuzz(func(t *testing.T, text, secret string) {
		once := Text(text)
		if twice := Text(once); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", text, once, twice)
		}
		// A credential in a known position never survives.
		if len(secret) < 6 || strings.ContainsAny(secret, "&#%\"'\\<> \t\r\n\f\v") || !isPlain(secret) {
			return
		}
		for _, planted := range []string{
			"x?access_token=" + secret + "&y=1",
			`{"client_secret":"` + secret + `"}`,
		} {
			if got := Text(text + " " + planted); strings.Contains(got, secret) && !strings.Contains(Control(text), secret) {
				t.Fatalf("secret survived in %q", got)
			}
		}
	})
}

func TestTextKnownSecrets(t *testing.T) {
	const sec = `rt_A+b/c=d"e`
	tests := []struct {
		name, in string
		secrets  []string
		gone     []string
		keep     []string
	}{
		{"raw", "token " + sec + " rejected", []string{sec}, []string{sec}, []string{"rejected"}},
		{"url-escaped", "refresh=" + url.QueryEscape(sec), []string{sec}, []string{url.QueryEscape(sec)}, nil},
		{"json-escaped", `{"x":"rt_A+b/c=d\"e"}`, []string{sec}, []string{`rt_A+b/c=d\"e`}, nil},
		{"form field", "grant_type=refresh_token&refresh_token=abc123&client_id=c1", nil, []string{"abc123"}, []string{"client_id=c1", "grant_type=refresh_token"}},
		{"json field", `{"access_token":"at-xyz","token_type":"Bearer"}`, nil, []string{"at-xyz"}, []string{"token_type"}},
		{"code in a URL", "http://127.0.0.1/callback?code=c0de&state=s", nil, []string{"c0de"}, []string{"state=s"}},
		{"authorization header", "Authorization: Bearer eyJhbGciOi.x.y", nil, []string{"eyJhbGciOi"}, []string{"Authorization"}},
		{"basic header", "Authorization: Basic Y2xpZW50OnNlY3JldA==", nil, []string{"Y2xpZW50OnNlY3JldA"}, nil},
		{"client secret", "client_secret=hunter22&x=1", nil, []string{"hunter22"}, []string{"x=1"}},
		{"short secrets ignored", "abc", []string{"ab"}, nil, []string{"abc"}},
		{"escape sequence inside a secret", "key s3cr\x1b[0met-v4lue here", []string{"s3cret-v4lue"}, []string{"s3cret-v4lue"}, []string{"here"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Text(tt.in, tt.secrets...)
			for _, g := range tt.gone {
				if strings.Contains(out, g) {
					t.Errorf("%q still in %q", g, out)
				}
			}
			for _, k := range tt.keep {
				if !strings.Contains(out, k) {
					t.Errorf("%q lost from %q", k, out)
				}
			}
		})
	}
}

func FuzzTextKnownSecret(f *testing.F) {
	f.Add("refresh_token=abc&x=1", "abc")
	f.Add(`{"access_token":"x\"y"}`, `x"y`)
	f.Fuzz(func(t *testing.T, s, secret string) {
		if len(strings.TrimSpace(secret)) < 3 || strings.TrimSpace(secret) != secret || strings.Contains(Mark, secret) {
			return
		}
		if out := Text(s+secret+s, secret); strings.Contains(out, secret) {
			t.Fatalf("secret %q survived in %q", secret, out)
		}
	})
}
