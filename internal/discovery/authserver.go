package discovery

import (
	"context"
	"fmt"
)

// AuthServerMetadata fetches the RFC 8414 (or OpenID Connect) metadata of
// the authorization server issuer, uncached: an identity provider that is
// not any server's authorization server.
func (d *Discoverer) AuthServerMetadata(ctx context.Context, issuer string) (*ServerMetadata, error) {
	md, _, _, err := d.fetchASMetadata(ctx, issuer)
	if err != nil {
		return nil, err
	}
	if md.Issuer != issuer {
		return nil, fmt.Errorf("metadata of %s names the issuer %q", issuer, md.Issuer)
	}
	return md, nil
}
