package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://mcp.example.test/mcp", "https://mcp.example.test/mcp"},
		{"https://user:pw@mcp.example.test/mcp", "https://[REDACTED]@mcp.example.test/mcp"},
		{"https://user:pw@host/mcp?api_key=K", "https://[REDACTED]@host/mcp?api_key=[REDACTED]"},
		{"https://mcp.example.test/mcp?access_token=abc&x=1", "https://mcp.example.test/mcp?access_token=[REDACTED]&x=1"},
		{"https://mcp.example.test/mcp?apiKey=abc&sig=zz&code=c", "https://mcp.example.test/mcp?apiKey=[REDACTED]&sig=[REDACTED]&code=[REDACTED]"},
		{"https://x/mcp?api_key=abc&region=eu", "https://x/mcp?api_key=[REDACTED]&region=eu"},
		{"https://mcp.example.test/mcp#frag", "https://mcp.example.test/mcp"},
		{"https://mcp.example.test/mcp#access_token=abc", "https://mcp.example.test/mcp"},
		{"https://mcp.example.test/mcp?next=Bearer%20abcdefgh", "https://mcp.example.test/mcp?next=Bearer%20[REDACTED]"},
		{"not a url", "[REDACTED]"},
		{"https://u:p@h/%zz", "[REDACTED]"},
	}
	for _, tt := range tests {
		if got := URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestURLSecrets(t *testing.T) {
	u, _ := url.Parse("https://alice:s3cr3t-pass@mcp.example.test/mcp?token=tok/en+1&region=eu")
	got := strings.Join(URLSecrets(u), " ")
	for _, want := range []string{"alice", "s3cr3t-pass", "tok/en+1", "tok/en 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("URLSecrets lacks %q: %s", want, got)
		}
	}
	if strings.Contains(got, "eu") {
		t.Errorf("URLSecrets holds a plain value: %s", got)
	}
	out := Text("dial alice:s3cr3t-pass tok%2Fen%2B1", URLSecrets(u)...)
	for _, s := range []string{"alice", "s3cr3t-pass", "tok%2Fen%2B1"} {
		if strings.Contains(out, s) {
			t.Errorf("%q survived: %s", s, out)
		}
	}
}

func FuzzURL(f *testing.F) {
	f.Add("https://u:secretpw@h.test/p?token=secretq&x=1")
	f.Add("http://h/p?a=b&access_token=zz%20z")
	f.Fuzz(func(t *testing.T, raw string) {
		out := URL(raw)
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			return
		}
		if p, ok := u.User.Password(); ok && len(p) >= 3 && strings.Contains(out, p) && !strings.Contains(u.Host+u.Path+u.RawQuery, p) && !strings.Contains(Mark, p) {
			t.Fatalf("password %q survived in %q", p, out)
		}
	})
}
