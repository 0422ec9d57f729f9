package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// verify checks a compact JWS with the key embedded in its header (nil:
// with pub) and returns its header and claims.
func verify(t *testing.T, token string, pub any) (jose.Header, map[string]any) {
	t.Helper()
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	h := jws.Signatures[0].Header
	if pub == nil {
		if h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
			t.Fatalf("no public jwk in the header: %+v", h)
		}
		pub = h.JSONWebKey
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return h, claims
}

func TestDPoPProof(t *testing.T) {
	key, err := NewDPoPKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name, target, token, nonce string
		wantHTU                    string
	}{
		{"token request", "https://as.example/token", "", "", "https://as.example/token"},
		{"resource request, query and fragment left out", "https://mcp.example/mcp?x=1#f", "tok", "n-1", "https://mcp.example/mcp"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proof, err := dpopProof(key, "POST", tt.target, tt.token, tt.nonce, now)
			if err != nil {
				t.Fatal(err)
			}
			h, c := verify(t, proof, nil)
			if h.ExtraHeaders["typ"] != "dpop+jwt" || h.Algorithm != "ES256" {
				t.Errorf("header typ %v alg %s", h.ExtraHeaders["typ"], h.Algorithm)
			}
			tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
			if want, _ := DPoPThumbprint(key); base64.RawURLEncoding.EncodeToString(tp) != want {
				t.Errorf("embedded key's thumbprint differs from the grant key's")
			}
			if c["htm"] != "POST" || c["htu"] != tt.wantHTU || c["iat"] != float64(now.Unix()) {
				t.Errorf("claims %v", c)
			}
			sum := sha256.Sum256([]byte(tt.token))
			if ath, ok := c["ath"]; (tt.token != "") != ok || (ok && ath != base64.RawURLEncoding.EncodeToString(sum[:])) {
				t.Errorf("ath %v for token %q", ath, tt.token)
			}
			if nonce, _ := c["nonce"].(string); nonce != tt.nonce {
				t.Errorf("nonce %q, want %q", nonce, tt.nonce)
			}
			jti, _ := c["jti"].(string)
			if jti == "" || seen[jti] {
				t.Errorf("jti %q is not fresh", jti)
			}
			seen[jti] = true
		})
	}
	if _, err := dpopProof("not a key", "POST", "https://x/", "", "", now); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Errorf("a bad stored key: err %v", err)
	}
}

func TestClientAssertion(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs8 := func(k any) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	sec1, _ := x509.MarshalECPrivateKey(ec)
	now := time.Now()
	for _, tt := range []struct {
		name, pem string
		pub       any
		alg       string
	}{
		{"EC PKCS#8", pkcs8(ec), &ec.PublicKey, "ES256"},
		{"EC SEC 1", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})), &ec.PublicKey, "ES256"},
		{"RSA PKCS#1", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rs)})), &rs.PublicKey, "RS256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := clientAssertion(tt.pem, "ci-client", "https://as.example", now)
			if err != nil {
				t.Fatal(err)
			}
			h, c := verify(t, a, tt.pub)
			if h.Algorithm != tt.alg || c["iss"] != "ci-client" || c["sub"] != "ci-client" || c["aud"] != "https://as.example" || c["jti"] == "" {
				t.Errorf("header alg %s, claims %v", h.Algorithm, c)
			}
			if exp, _ := c["exp"].(float64); time.Unix(int64(exp), 0).Sub(now) > assertionLifetime+time.Second {
				t.Errorf("exp %v: longer than %s", exp, assertionLifetime)
			}
		})
	}
	secret := "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWNhbmFyeQ==\n-----END PRIVATE KEY-----\n"
	if _, err := clientAssertion(secret, "c", "a", now); err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Errorf("an unparsable key: err %v (must not quote it)", err)
	}
}
