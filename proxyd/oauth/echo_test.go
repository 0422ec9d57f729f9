package oauth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// newEchoServer is a token endpoint that answers 200 with a non-token
// body quoting the whole request, in raw, URL- and JSON-escaped forms.
func newEchoServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		raw, _ := url.QueryUnescape(string(b))
		j, _ := json.Marshal(map[string]string{"echo": raw, "form": string(b), "auth": r.Header.Get("Authorization")})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>" + raw + string(b) + string(j) + "</html>"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
