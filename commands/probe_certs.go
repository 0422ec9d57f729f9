package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/probe"
)

// tlsChain is the chain the server presented, from the TLS step's data.
func tlsChain(rep *probe.Report) []probe.CertInfo {
	for _, s := range rep.Steps {
		if s.ID != probe.StepTLS || s.Data == nil {
			continue
		}
		b, err := json.Marshal(s.Data)
		if err != nil {
			return nil
		}
		var d struct {
			Chain []probe.CertInfo `json:"chain"`
		}
		if json.Unmarshal(b, &d) != nil {
			return nil
		}
		return d.Chain
	}
	return nil
}

// printCertificates shows what operators look for in a certificate: the
// leaf's subject, issuer, names, validity and fingerprint; with all, every
// certificate presented and its PEM.
func printCertificates(w io.Writer, rep *probe.Report, all bool) {
	chain := tlsChain(rep)
	if len(chain) == 0 {
		return
	}
	show := chain[:1]
	if all {
		show = chain
	}
	for i, c := range show {
		title := "certificate"
		if all {
			title = fmt.Sprintf("certificate %d of %d", i+1, len(chain))
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		fmt.Fprintf(w, "  subject:   %s\n  issuer:    %s\n", c.Subject, c.Issuer)
		if len(c.SANs) > 0 {
			fmt.Fprintf(w, "  names:     %s\n", strings.Join(c.SANs, ", "))
		}
		left := fmt.Sprintf("%d days left", c.DaysLeft)
		if !c.NotAfter.After(time.Now()) {
			left = fmt.Sprintf("expired %s ago", humanDuration(time.Since(c.NotAfter)))
		}
		fmt.Fprintf(w, "  valid:     %s to %s (%s)\n", tableTime(c.NotBefore), tableTime(c.NotAfter), left)
		fmt.Fprintf(w, "  sha256:    %s\n", c.SHA256)
		if all && c.PEM != "" {
			fmt.Fprint(w, c.PEM)
		}
	}
	if !all && len(chain) > 1 {
		fmt.Fprintf(w, "  (%d more in the chain: --show-certs)\n", len(chain)-1)
	}
}

// withoutPEM drops the certificates' PEM from the TLS step's data unless
// --show-certs asked for it.
func withoutPEM(rep *probe.Report) {
	for i, s := range rep.Steps {
		if s.ID != probe.StepTLS || s.Data == nil {
			continue
		}
		b, err := json.Marshal(s.Data)
		if err != nil {
			return
		}
		var d map[string]any
		if json.Unmarshal(b, &d) != nil {
			return
		}
		if chain, ok := d["chain"].([]any); ok {
			for _, c := range chain {
				if m, ok := c.(map[string]any); ok {
					delete(m, "pem")
				}
			}
		}
		rep.Steps[i].Data = d
	}
}
