package httppolicy

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestRedirect(t *testing.T) {
	req := func(method, raw string) *http.Request {
		u, _ := url.Parse(raw)
		return &http.Request{Method: method, URL: u}
	}
	tests := []struct {
		name        string
		from, to    *http.Request
		credentials bool // refused with CrossOriginReads unset
		reads       bool // refused with CrossOriginReads set
	}{
		{"same origin", req("GET", "https://as.example.com/a"), req("GET", "https://as.example.com/b"), false, false},
		{"explicit default port", req("POST", "https://as.example.com/token"), req("POST", "https://as.example.com:443/v2/token"), false, false},
		{"https to http off loopback", req("GET", "https://as.example.com/a"), req("GET", "http://as.example.com/b"), true, true},
		{"https to http on loopback, same host", req("GET", "https://127.0.0.1:9/a"), req("GET", "http://127.0.0.1:9/b"), true, false},
		{"https to http on loopback, elsewhere", req("GET", "https://as.example.com/a"), req("GET", "http://127.0.0.1:9/b"), true, false},
		{"http to http on the same host", req("GET", "http://10.0.0.2/a"), req("GET", "http://10.0.0.2/b"), false, false},
		{"GET to another origin", req("GET", "https://as.example.com/a"), req("GET", "https://b.example.com/b"), true, false},
		{"POST to another origin", req("POST", "https://as.example.com/token"), req("GET", "https://b.example.com/token"), true, true},
		{"POST to another port", req("POST", "http://127.0.0.1:8000/token"), req("POST", "http://127.0.0.1:8001/token"), true, true},
		{"DELETE to another origin", req("DELETE", "https://up.example.com/mcp"), req("DELETE", "https://b.example.com/mcp"), true, true},
		{"link-local target", req("GET", "https://as.example.com/a"), req("GET", "https://169.254.169.254/latest"), true, true},
		{"link-local target, same origin", req("GET", "http://169.254.169.254/a"), req("GET", "http://169.254.169.254/b"), true, true},
		{"userinfo target", req("GET", "https://as.example.com/a"), req("GET", "https://u:p@as.example.com/b"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range []struct {
				policy  Redirect
				refused bool
			}{{Redirect{}, tt.credentials}, {Redirect{CrossOriginReads: true}, tt.reads}} {
				err := p.policy.Check(tt.to, []*http.Request{tt.from})
				if (err != nil) != p.refused {
					t.Fatalf("%+v: err = %v, refused want %v", p.policy, err, p.refused)
				}
				if err != nil && !errors.Is(err, ErrRedirectRefused) {
					t.Fatalf("err = %v does not wrap ErrRedirectRefused", err)
				}
				if err != nil && strings.Contains(err.Error(), "u:p") {
					t.Fatalf("userinfo in the error: %v", err)
				}
			}
		})
	}
}

func TestRedirectHops(t *testing.T) {
	u, _ := url.Parse("https://as.example.com/a")
	var via []*http.Request
	for range MaxRedirects {
		via = append(via, &http.Request{Method: "GET", URL: u})
	}
	if err := (Redirect{}).Check(&http.Request{Method: "GET", URL: u}, via[:MaxRedirects-1]); err != nil {
		t.Fatalf("hop %d refused: %v", MaxRedirects, err)
	}
	if err := (Redirect{}).Check(&http.Request{Method: "GET", URL: u}, via); !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("hop %d: err = %v", MaxRedirects+1, err)
	}
}

func TestRedirectLive(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/landed", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	reads := &http.Client{CheckRedirect: Redirect{CrossOriginReads: true}.Check}
	strict := &http.Client{CheckRedirect: Redirect{}.Check}

	resp, err := reads.Get(redirector.URL)
	if err != nil {
		t.Fatalf("GET cross-origin redirect refused: %v", err)
	}
	resp.Body.Close()
	if _, err := strict.Get(redirector.URL); !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("GET cross-origin redirect with credentials: err = %v", err)
	}
	if _, err := reads.Post(redirector.URL, "application/x-www-form-urlencoded", strings.NewReader("grant_type=x")); !errors.Is(err, ErrRedirectRefused) {
		t.Fatalf("POST cross-origin redirect: err = %v", err)
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST.": true, "a.localhost": true, "127.0.0.1": true, "127.9.9.9": true, "::1": true, "[::1]": true,
		"example.com": false, "10.0.0.1": false, "localhost.example.com": false, "": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v", host, got)
		}
	}
}
