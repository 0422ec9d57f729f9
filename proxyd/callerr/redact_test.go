package callerr

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
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
		{"jwt anywhere", "token was " + jwt + " ok", "token was [REDACTED] ok"},
		{"challenge kept", `WWW-Authenticate: Bearer realm="mcp", resource_metadata="https://x/.well-known"`, `Bearer realm="mcp"`},
		{"error_code not a code param", "error_code=E42", "error_code=E42"},
		{"plain text", "request failed with status 502", "request failed with status 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.in)
			if strings.Contains(got, secret) || strings.Contains(got, jwt) {
				t.Errorf("Redact(%q) = %q: secret survived", tt.in, got)
			}
			if !strings.Contains(got, tt.keep) {
				t.Errorf("Redact(%q) = %q, want it to contain %q", tt.in, got, tt.keep)
			}
			if again := Redact(got); again != got {
				t.Errorf("not idempotent: %q -> %q", got, again)
			}
		})
	}
}

func TestStripControl(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"red \x1b[31mALERT\x1b[0m done", "red ALERT done"},
		{"title \x1b]0;pwned\x07 after", "title  after"},
		{"osc st \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "osc st link"},
		{"bell\x07 back\x08space\rcr", "bell backspacecr"},
		{"c1 \u009b31m csi", "c1 31m csi"},
		{"bidi \u202eevil\u202c", "bidi evil"},
		{"del\x7f", "del"},
		{"unicode ünïcödé ok", "unicode ünïcödé ok"},
		{"bad utf8 \xff end", "bad utf8 \uFFFD end"},
		{"trailing esc \x1b", "trailing esc "},
		{"two-byte \x1bc reset", "two-byte  reset"},
	}
	for _, tt := range tests {
		if got := StripControl(tt.in); got != tt.want {
			t.Errorf("StripControl(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"Authorization: Bearer abc.def", `{"access_token":"x"}`, "code=1&state=2", "a%3Daccess_token%3Dq",
		`\"refresh_token\":\"z\"`, "bearer%20tok", "eyJabcd.eyJabcd.sig",
	} {
		f.Add(s, "tok3nValue")
	}
	f.Fuzz(func(t *testing.T, text, secret string) {
		once := Redact(text)
		if twice := Redact(once); twice != once {
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
			if got := Redact(text + " " + planted); strings.Contains(got, secret) && !strings.Contains(text, secret) {
				t.Fatalf("secret survived in %q", got)
			}
		}
	})
}

func FuzzStripControl(f *testing.F) {
	f.Add("a\x1b[31mb\x1b]0;t\x07c")
	f.Fuzz(func(t *testing.T, s string) {
		out := StripControl(s)
		for _, r := range out {
			if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control %U left in %q", r, out)
			}
		}
	})
}
