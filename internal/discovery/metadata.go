package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ProtectedResource is RFC 9728 protected-resource metadata.
type ProtectedResource struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
}

// ServerMetadata is RFC 8414 authorization server metadata (the fields
// mcpx uses; OpenID Connect discovery documents decode into it too).
type ServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                              string   `json:"token_endpoint,omitempty"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                         string   `json:"revocation_endpoint,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	ResponseTypesSupported                     []string `json:"response_types_supported,omitempty"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported,omitempty"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
	DPoPSigningAlgValuesSupported              []string `json:"dpop_signing_alg_values_supported,omitempty"`

	// grantTypesPresent distinguishes an absent grant_types_supported
	// from an empty list: only a present list that lacks refresh_token
	// earns the refresh warning.
	grantTypesPresent bool
}

// GrantTypesAdvertised reports whether the document carried
// grant_types_supported at all (possibly empty).
func (m *ServerMetadata) GrantTypesAdvertised() bool {
	return m.grantTypesPresent || m.GrantTypesSupported != nil
}

// LacksRefreshGrant reports whether the server advertises grant types and
// refresh_token is not among them.
func (m *ServerMetadata) LacksRefreshGrant() bool {
	return m.GrantTypesAdvertised() && !slices.Contains(m.GrantTypesSupported, "refresh_token")
}

// ErrMalformedMetadata is wrapped when a metadata document is not a JSON
// object of the expected shape.
var ErrMalformedMetadata = errors.New("malformed metadata document")

// ParseProtectedResource decodes RFC 9728 metadata.
func ParseProtectedResource(b []byte) (*ProtectedResource, error) {
	var pr ProtectedResource
	if err := json.Unmarshal(b, &pr); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedMetadata, err)
	}
	return &pr, nil
}

// ParseServerMetadata decodes RFC 8414 or OpenID Connect metadata.
func ParseServerMetadata(b []byte) (*ServerMetadata, error) {
	var m ServerMetadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedMetadata, err)
	}
	var probe struct {
		GrantTypes *json.RawMessage `json:"grant_types_supported"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.GrantTypes != nil && string(*probe.GrantTypes) != "null" {
		m.grantTypesPresent = true
		if m.GrantTypesSupported == nil {
			m.GrantTypesSupported = []string{}
		}
	}
	return &m, nil
}

// Finding is one result of Lint.
type Finding struct {
	Level   string `json:"level"` // ok|warn|fail
	Check   string `json:"check"`
	Message string `json:"message"`
}

// Finding levels.
const (
	LevelOK   = "ok"
	LevelWarn = "warn"
	LevelFail = "fail"
)

// Lint checks authorization server metadata for what an MCP client needs.
func Lint(m *ServerMetadata) []Finding {
	if m == nil {
		return []Finding{{LevelFail, "metadata", "no authorization server metadata"}}
	}
	var out []Finding
	add := func(level, check, msg string) { out = append(out, Finding{level, check, msg}) }

	switch {
	case m.AuthorizationEndpoint == "" || m.TokenEndpoint == "":
		add(LevelFail, "endpoints", "authorization_endpoint or token_endpoint is missing; set oauth.authorization_endpoint / oauth.token_endpoint")
	default:
		add(LevelOK, "endpoints", "authorization and token endpoints advertised")
	}

	switch {
	case len(m.CodeChallengeMethodsSupported) == 0:
		add(LevelFail, "pkce", "code_challenge_methods_supported is absent: MCP clients must refuse to sign in; set allow_missing_pkce_methods: true for this server to proceed with S256 anyway")
	case !slices.Contains(m.CodeChallengeMethodsSupported, "S256"):
		add(LevelFail, "pkce", fmt.Sprintf("PKCE S256 not supported (advertised: %s)", strings.Join(m.CodeChallengeMethodsSupported, ", ")))
	default:
		add(LevelOK, "pkce", "PKCE S256 supported")
	}

	switch {
	case m.ClientIDMetadataDocumentSupported && m.RegistrationEndpoint != "":
		add(LevelOK, "registration", "client ID metadata documents and dynamic registration supported")
	case m.ClientIDMetadataDocumentSupported:
		add(LevelOK, "registration", "client ID metadata documents supported")
	case m.RegistrationEndpoint != "":
		add(LevelOK, "registration", "dynamic client registration supported")
	default:
		add(LevelWarn, "registration", "no registration_endpoint and no client ID metadata document support: configure oauth.client_id")
	}

	switch {
	case m.LacksRefreshGrant():
		add(LevelWarn, "refresh_token", "refresh_token is not in grant_types_supported: users must sign in again at every expiry")
	case m.GrantTypesAdvertised():
		add(LevelOK, "refresh_token", "refresh_token grant supported")
	default:
		add(LevelOK, "refresh_token", "grant_types_supported not advertised")
	}

	if slices.Contains(m.ScopesSupported, "offline_access") {
		add(LevelOK, "offline_access", "offline_access listed in scopes_supported")
	} else {
		add(LevelOK, "offline_access", "offline_access not listed; refresh tokens depend on the server's policy")
	}

	methods := m.TokenEndpointAuthMethodsSupported
	switch {
	case len(methods) == 0:
		add(LevelWarn, "token_endpoint_auth", "token_endpoint_auth_methods_supported absent (RFC 8414 default client_secret_basic): public clients may be refused")
	case slices.Contains(methods, "none"):
		add(LevelOK, "token_endpoint_auth", "public clients (none) supported")
	case slices.Contains(methods, "client_secret_post") || slices.Contains(methods, "client_secret_basic"):
		add(LevelWarn, "token_endpoint_auth", "public clients not supported: a client secret is required")
	default:
		add(LevelFail, "token_endpoint_auth", fmt.Sprintf("no supported token endpoint auth method (advertised: %s)", strings.Join(methods, ", ")))
	}

	if len(m.ResponseTypesSupported) > 0 && !slices.Contains(m.ResponseTypesSupported, "code") {
		add(LevelFail, "response_types", "response type \"code\" not supported")
	}
	return out
}
