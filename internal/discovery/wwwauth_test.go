package discovery

import (
	"testing"
)

func TestParseWWWAuthenticate(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []Challenge
		wantErr bool
	}{
		{
			name: "bearer with resource metadata",
			in:   []string{`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="read write"`},
			want: []Challenge{{Scheme: "Bearer", ResourceMetadata: "https://mcp.example.com/.well-known/oauth-protected-resource", Scope: "read write"}},
		},
		{
			name: "insufficient scope with escapes",
			in:   []string{`Bearer error="insufficient_scope", error_description="need \"admin\"", scope=admin`},
			want: []Challenge{{Scheme: "Bearer", Error: "insufficient_scope", ErrorDescription: `need "admin"`, Scope: "admin"}},
		},
		{
			name: "two challenges in one header",
			in:   []string{`Basic realm="x", Bearer realm="y", error=invalid_token`},
			want: []Challenge{{Scheme: "Basic"}, {Scheme: "Bearer", Error: "invalid_token"}},
		},
		{
			name: "two headers",
			in:   []string{`Basic realm="x"`, `bearer scope="a"`},
			want: []Challenge{{Scheme: "Basic"}, {Scheme: "bearer", Scope: "a"}},
		},
		{
			name: "token68",
			in:   []string{`Negotiate abc+/def==, Bearer`},
			want: []Challenge{{Scheme: "Negotiate"}, {Scheme: "Bearer"}},
		},
		{
			name: "bare scheme",
			in:   []string{`Bearer`},
			want: []Challenge{{Scheme: "Bearer"}},
		},
		{
			name: "upper-case param names and spaces around equals",
			in:   []string{`Bearer  Resource_Metadata = "https://a/b" ,SCOPE="s"`},
			want: []Challenge{{Scheme: "Bearer", ResourceMetadata: "https://a/b", Scope: "s"}},
		},
		{
			name: "comma inside quoted string",
			in:   []string{`Bearer error_description="a, b", scope="x"`},
			want: []Challenge{{Scheme: "Bearer", ErrorDescription: "a, b", Scope: "x"}},
		},
		{
			name:    "unterminated quote keeps what it can",
			in:      []string{`Bearer scope="read`},
			want:    []Challenge{{Scheme: "Bearer", Scope: "read"}},
			wantErr: true,
		},
		{
			name:    "garbage then a good challenge",
			in:      []string{`="x", Bearer scope="ok"`},
			want:    []Challenge{{Scheme: "Bearer", Scope: "ok"}},
			wantErr: true,
		},
		{
			name: "empty",
			in:   []string{"", "  ,  "},
		},
		{
			name: "duplicate param keeps first",
			in:   []string{`Bearer scope="a", scope="b"`},
			want: []Challenge{{Scheme: "Bearer", Scope: "a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseWWWAuthenticate(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d challenges %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Scheme != w.Scheme || g.ResourceMetadata != w.ResourceMetadata || g.Scope != w.Scope || g.Error != w.Error || g.ErrorDescription != w.ErrorDescription {
					t.Errorf("challenge %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestParseWWWAuthenticateToken68Value(t *testing.T) {
	got, err := ParseWWWAuthenticate([]string{`Negotiate abc+/def==`})
	if err != nil || len(got) != 1 || got[0].Params[""] != "abc+/def==" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestBearerChallenge(t *testing.T) {
	cs, _ := ParseWWWAuthenticate([]string{`Basic realm="x", BEARER scope="s"`})
	b := BearerChallenge(cs)
	if b == nil || b.Scope != "s" {
		t.Fatalf("BearerChallenge = %+v", b)
	}
	if BearerChallenge(cs[:1]) != nil {
		t.Fatal("found a bearer challenge among Basic only")
	}
}

func FuzzParseWWWAuthenticate(f *testing.F) {
	for _, s := range []string{
		`Bearer resource_metadata="https://x/y", scope="a b"`,
		`Basic realm="x", Bearer error="invalid_token"`,
		`Negotiate abc==`,
		`Bearer scope="unterminated`,
		`="x",,, Bearer`,
		`Bearer a="\\\"", b=c`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, _ := ParseWWWAuthenticate([]string{s})
		for _, c := range cs {
			if c.Scheme == "" {
				t.Fatalf("empty scheme from %q", s)
			}
			if c.Params == nil {
				t.Fatalf("nil params from %q", s)
			}
		}
	})
}

func FuzzParseServerMetadata(f *testing.F) {
	f.Add([]byte(`{"issuer":"https://as","grant_types_supported":[]}`))
	f.Add([]byte(`{"issuer":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseServerMetadata(b)
		if err == nil {
			_ = Lint(m)
		}
		_, _ = ParseProtectedResource(b)
	})
}
