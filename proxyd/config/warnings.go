package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"

	"github.com/mcpx-dev/mcpx/internal/secretref"
)

// Warnings lists problems that do not stop proxyd from starting but that
// the user should hear about: a CA file that cannot be read (checked now,
// not at parse time, because the file may appear later) and plain-HTTP
// URLs to other machines. Like Validate's errors they point into the file.
func (c *Config) Warnings() []*Error {
	var errs []*Error
	v := &validator{src: c.src, errs: &errs}
	if c.src != nil {
		v.file = c.src.file
	}
	for i := range c.Servers {
		s := &c.Servers[i]
		sv := v.forServer(c, i)
		if s.Disabled {
			continue
		}
		if s.TLS != nil && s.TLS.CAFile != "" {
			if _, err := os.ReadFile(s.TLS.CAFile); err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				sv.add("tls.ca_file", fmt.Sprintf("%scannot read ca_file %q: %v", prefix(sv.where), s.TLS.CAFile, err), "point ca_file at a readable PEM file")
			}
		}
		for _, k := range sortedKeys(s.Headers) {
			if secretLookingHeader(k) && !credentialHeader(k) && !secretref.Has(s.Headers[k]) {
				sv.add("headers["+k+"]", fmt.Sprintf("%sheader %s looks like a credential written into the config file", prefix(sv.where), k),
					"reference it instead: ${env:NAME} or ${file:PATH} (resolved by proxyd when it connects)")
			}
		}
		if u, err := url.Parse(s.URL); err == nil && u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
			sv.add("url", prefix(sv.where)+"url uses plain http:// to another machine; calls and tokens travel unencrypted", "use https://")
		}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
