package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/mcpx-dev/mcpx/internal/discovery"
)

// DPoP (RFC 9449) binds a grant's tokens to a key pair: every token
// request and every request to the server carries a proof signed with the
// grant's private key, which lives in the token store only.

// dpopAlg is the proof algorithm mcpx signs with (P-256); an authorization
// server that lists DPoP algorithms without it is used with bearer tokens.
const dpopAlg = "ES256"

// SupportsDPoP reports whether md advertises DPoP proofs mcpx can sign.
func SupportsDPoP(md *discovery.ServerMetadata) bool {
	return md != nil && slices.Contains(md.DPoPSigningAlgValuesSupported, dpopAlg)
}

// NewDPoPKey returns a new grant key, encoded for the token store.
func NewDPoPKey() (string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate DPoP key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("encode DPoP key: %w", err)
	}
	return base64.RawStdEncoding.EncodeToString(der), nil
}

// dpopKeys caches parsed grant keys by their stored encoding: parsing on
// every request would cost more than signing.
var dpopKeys sync.Map // string → *ecdsa.PrivateKey

func parseDPoPKey(stored string) (*ecdsa.PrivateKey, error) {
	if k, ok := dpopKeys.Load(stored); ok {
		return k.(*ecdsa.PrivateKey), nil
	}
	der, err := base64.RawStdEncoding.DecodeString(stored)
	if err != nil {
		return nil, errors.New("stored DPoP key is not readable: sign in again")
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	ec, ok := k.(*ecdsa.PrivateKey)
	if err != nil || !ok {
		return nil, errors.New("stored DPoP key is not a P-256 key: sign in again")
	}
	dpopKeys.Store(stored, ec)
	return ec, nil
}

// DPoPThumbprint is the RFC 7638 SHA-256 thumbprint of a stored key's
// public half (the token's cnf.jkt), base64url.
func DPoPThumbprint(stored string) (string, error) {
	k, err := parseDPoPKey(stored)
	if err != nil {
		return "", err
	}
	jwk := jose.JSONWebKey{Key: &k.PublicKey}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("DPoP key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// dpopProof signs a proof for one request: method and target (query and
// fragment left out), a fresh jti, the access token's hash when one is
// presented, and the server's nonce when it gave one.
func dpopProof(stored, method, target, accessToken, nonce string, now time.Time) (string, error) {
	k, err := parseDPoPKey(stored)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("DPoP proof target: %w", err)
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return "", fmt.Errorf("DPoP signer: %w", err)
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	claims := map[string]any{
		"jti": base64.RawURLEncoding.EncodeToString(jti),
		"htm": method,
		"htu": u.String(),
		"iat": now.Unix(),
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	proof, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign DPoP proof: %w", err)
	}
	return proof, nil
}

// dpopNonces remembers the last DPoP-Nonce each origin sent (RFC 9449 §8,
// §9), bounded: an authorization server and a resource server each keep
// their own.
type dpopNonces struct {
	mu sync.Mutex
	m  map[string]string
}

const maxDPoPNonces = 256

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

func (n *dpopNonces) get(u *url.URL) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[origin(u)]
}

// note keeps the nonce of resp, if it carries one.
func (n *dpopNonces) note(u *url.URL, resp *http.Response) {
	v := strings.TrimSpace(resp.Header.Get("DPoP-Nonce"))
	if v == "" || len(v) > 512 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	if _, ok := n.m[origin(u)]; !ok && len(n.m) >= maxDPoPNonces {
		clear(n.m)
	}
	n.m[origin(u)] = v
}

// nonces is shared by every grant: a nonce belongs to a server, not to a
// key.
var nonces dpopNonces

// dpopTokenTransport adds a proof to each token request and keeps the
// authorization server's nonce. A use_dpop_nonce answer is retried by the
// caller (retryNonce): the request is built again, since a client
// assertion, like a proof, is good for one request only.
type dpopTokenTransport struct {
	next http.RoundTripper
	key  string
	now  func() time.Time
}

// withDPoP returns a copy of hc whose requests carry proofs of key.
func withDPoP(hc *http.Client, key string, now func() time.Time) *http.Client {
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cp := *hc
	cp.Transport = &dpopTokenTransport{next: next, key: key, now: now}
	return &cp
}

func (t *dpopTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	proof, err := dpopProof(t.key, req.Method, req.URL.String(), "", nonces.get(req.URL), t.now())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("DPoP", proof)
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		nonces.note(req.URL, resp)
	}
	return resp, err
}

// retryNonce runs a token request, and once more when the authorization
// server answered use_dpop_nonce (RFC 9449 §8): its nonce is kept by then.
func retryNonce(dpop bool, request func() (*oauth2.Token, error)) (*oauth2.Token, error) {
	t, err := request()
	var re *oauth2.RetrieveError
	if dpop && errors.As(err, &re) && re.ErrorCode == "use_dpop_nonce" {
		return request()
	}
	return t, err
}
