// Package secretref resolves secret references in configuration values:
// ${env:NAME} is the environment variable NAME and ${file:PATH} the
// content of the file PATH (one trailing newline removed). A value may mix
// references and literal text ("postgres://app:${env:PGPASS}@db/mcpx").
// References are resolved when the secret is used, never written back, and
// their results are never logged.
package secretref

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var ref = regexp.MustCompile(`\$\{(env|file):([^}]*)\}`)

// Has reports whether s contains a reference.
func Has(s string) bool { return ref.MatchString(s) }

// Strip is s with every reference removed: what is written inline.
func Strip(s string) string { return ref.ReplaceAllString(s, "") }

// Check validates the references of s without resolving them.
func Check(s string) error {
	for _, m := range ref.FindAllStringSubmatch(s, -1) {
		if strings.TrimSpace(m[2]) == "" {
			return fmt.Errorf("%s names nothing: write ${%s:NAME}", m[0], m[1])
		}
	}
	if rest := ref.ReplaceAllString(s, ""); strings.Contains(rest, "${") {
		return errors.New("unknown reference: use ${env:NAME} or ${file:PATH}")
	}
	return nil
}

// Expand resolves every reference of s. A missing variable or unreadable
// file is an error naming the reference, never its value.
func Expand(s string) (string, error) { return ExpandFrom(s, "") }

// ExpandFrom is Expand with relative ${file:PATH} references taken from
// dir (the directory of the file that holds them).
func ExpandFrom(s, dir string) (string, error) {
	if err := Check(s); err != nil {
		return "", err
	}
	var firstErr error
	out := ref.ReplaceAllStringFunc(s, func(m string) string {
		sub := ref.FindStringSubmatch(m)
		switch sub[1] {
		case "env":
			v, ok := os.LookupEnv(sub[2])
			if !ok && firstErr == nil {
				firstErr = fmt.Errorf("%s: environment variable %s is not set", m, sub[2])
			}
			return v
		default:
			p := sub[2]
			if dir != "" && !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := os.ReadFile(p)
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", m, errors.Unwrap(err))
				if errors.Unwrap(err) == nil {
					firstErr = fmt.Errorf("%s: cannot read the file", m)
				}
			}
			return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		}
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}
