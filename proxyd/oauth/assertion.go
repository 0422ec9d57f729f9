package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// clientAssertionType is the RFC 7523 client assertion type of
// private_key_jwt.
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime bounds a client assertion: it is made for one token
// request.
const assertionLifetime = 2 * time.Minute

// signingKey parses a PEM private key (PKCS#8, or SEC 1 / PKCS#1) and
// picks its JWS algorithm. Errors never quote the key.
func signingKey(pemText string) (crypto.Signer, jose.SignatureAlgorithm, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, "", errors.New("private_key is not a PEM block (-----BEGIN PRIVATE KEY----- ...)")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, "", fmt.Errorf("private_key (%s) cannot be parsed", block.Type)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jose.ES256, nil
		case elliptic.P384():
			return k, jose.ES384, nil
		case elliptic.P521():
			return k, jose.ES512, nil
		}
		return nil, "", errors.New("private_key: unsupported elliptic curve (use P-256, P-384 or P-521)")
	case *rsa.PrivateKey:
		return k, jose.RS256, nil
	case ed25519.PrivateKey:
		return k, jose.EdDSA, nil
	}
	return nil, "", fmt.Errorf("private_key: unsupported key type %T", key)
}

// clientAssertion signs the private_key_jwt assertion of one token
// request: the client is issuer and subject, the authorization server's
// issuer the audience (RFC 7523bis).
func clientAssertion(pemText, clientID, audience string, now time.Time) (string, error) {
	key, alg, err := signingKey(pemText)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("client assertion signer: %w", err)
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	claims := jwt.Claims{
		Issuer:    clientID,
		Subject:   clientID,
		Audience:  jwt.Audience{audience},
		ID:        base64.RawURLEncoding.EncodeToString(jti),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now.Add(-5 * time.Second)),
		Expiry:    jwt.NewNumericDate(now.Add(assertionLifetime)),
	}
	out, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign client assertion: %w", err)
	}
	return out, nil
}
