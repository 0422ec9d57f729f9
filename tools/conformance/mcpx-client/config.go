package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// clientMetadataURL is the client ID metadata document URL the suite's
// authorization server expects (basic-cimd); mcpx uses it only when the
// authorization server advertises client_id_metadata_document_supported.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// scenarioContext is MCP_CONFORMANCE_CONTEXT: what a scenario hands the
// client besides the server URL. Each scenario sets some of the fields.
type scenarioContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	ValidJWT         string `json:"valid_jwt"` // workload identity token
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPIssuer        string `json:"idp_issuer"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
	// ToolCalls are calls the scenario wants made, with its arguments.
	ToolCalls []toolCall `json:"toolCalls"`
}

type toolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func parseContext(raw string) (scenarioContext, error) {
	var c scenarioContext
	if raw == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return c, fmt.Errorf("decoding MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	return c, nil
}

// writeConfig writes the config a user would write for this scenario's
// server. Secrets go to 0600 files the config references, never inline.
func (m *mcpx) writeConfig(scenario, serverURL string, c scenarioContext) error {
	// JSON strings are valid YAML double-quoted scalars.
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	ref := func(name, value string) (string, error) {
		p := filepath.Join(m.dir, name)
		if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
		return q("${file:" + p + "}"), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nservers:\n  - name: %s\n    url: %s\n", serverName, q(serverURL))
	if !strings.HasPrefix(scenario, "auth/") {
		return m.write(b.String())
	}
	b.WriteString("    oauth:\n")
	line := func(k, v string) { fmt.Fprintf(&b, "      %s: %s\n", k, v) }
	if c.ClientID != "" {
		line("client_id", q(c.ClientID))
	}
	if c.ClientSecret != "" {
		r, err := ref("client-secret", c.ClientSecret)
		if err != nil {
			return err
		}
		line("client_secret", r)
	}
	switch scenario {
	case "auth/client-credentials-basic", "auth/client-credentials-jwt":
		line("grant", "client_credentials")
		if c.PrivateKeyPEM != "" {
			r, err := ref("client-key.pem", c.PrivateKeyPEM)
			if err != nil {
				return err
			}
			line("private_key", r)
		}
	case "auth/wif-jwt-bearer":
		// The workload's identity token, as CI systems and Kubernetes
		// project it into a file.
		r, err := ref("workload.jwt", c.ValidJWT)
		if err != nil {
			return err
		}
		line("grant", "jwt_bearer")
		line("assertion", r)
	case "auth/enterprise-managed-authorization":
		r, err := ref("id-token.jwt", c.IdPIDToken)
		if err != nil {
			return err
		}
		line("grant", "token_exchange")
		b.WriteString("      identity_provider:\n")
		fmt.Fprintf(&b, "        issuer: %s\n        client_id: %s\n        id_token: %s\n", q(c.IdPIssuer), q(c.IdPClientID), r)
	case "auth/dpop", "auth/dpop-nonce":
		line("dpop", "true")
		line("client_metadata_url", q(clientMetadataURL))
	default:
		line("client_metadata_url", q(clientMetadataURL))
	}
	return m.write(b.String())
}

func (m *mcpx) write(config string) error {
	if err := os.WriteFile(filepath.Join(m.dir, "config.yaml"), []byte(config), 0o600); err != nil {
		return fmt.Errorf("writing the config: %w", err)
	}
	return nil
}
