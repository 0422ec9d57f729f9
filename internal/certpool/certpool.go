// Package certpool builds the trust store for a server with a private CA:
// the system roots plus a PEM bundle (tls.ca_file, --ca-file).
package certpool

import (
	"crypto/x509"
	"fmt"
	"os"
)

// Load returns the system roots plus the certificates of file; just the
// system roots when file is empty.
func Load(file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if file == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}
