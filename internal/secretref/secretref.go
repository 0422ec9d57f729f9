// Package secretref resolves secrets given by reference, `${env:NAME}` or
// `${file:PATH}`, so that files which name a secret never hold it. Errors
// name the reference, never a value.
package secretref

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// MaxFile bounds a ${file:...} secret: tokens and keys are small, and a
// reference to a large file is a mistake.
const MaxFile = 64 << 10

var refRE = regexp.MustCompile(`\$\{(env|file):([^}]*)\}`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ErrUnresolved is wrapped by every resolution failure.
var ErrUnresolved = errors.New("secret reference not resolved")

// Has reports whether s holds a reference.
func Has(s string) bool { return refRE.MatchString(s) }

// Resolve replaces every reference in s: ${env:NAME} by the variable's
// value (which must be set and not empty), ${file:PATH} by the file's
// content without its trailing newline. A relative PATH is taken from dir.
// Text around references is kept ("Bearer ${env:TOKEN}").
func Resolve(s, dir string) (string, error) {
	if strings.Count(s, "${") > len(refRE.FindAllString(s, -1)) {
		return "", fmt.Errorf("%w: a ${...} reference must be ${env:NAME} or ${file:PATH}", ErrUnresolved)
	}
	var firstErr error
	out := refRE.ReplaceAllStringFunc(s, func(m string) string {
		parts := refRE.FindStringSubmatch(m)
		v, err := resolveOne(parts[1], parts[2], dir)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

func resolveOne(kind, name, dir string) (string, error) {
	switch kind {
	case "env":
		if !envNameRE.MatchString(name) {
			return "", fmt.Errorf("%w: ${env:%s}: not a variable name", ErrUnresolved, name)
		}
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: ${env:%s}: the variable is not set (export it, or use ${file:PATH})", ErrUnresolved, name)
		}
		return v, nil
	case "file":
		if name == "" {
			return "", fmt.Errorf("%w: ${file:}: no path", ErrUnresolved)
		}
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("%w: ${file:%s}: %v", ErrUnresolved, name, errors.Unwrap(err))
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
		if err != nil {
			return "", fmt.Errorf("%w: ${file:%s}: reading: %v", ErrUnresolved, name, errors.Unwrap(err))
		}
		if len(b) > MaxFile {
			return "", fmt.Errorf("%w: ${file:%s}: larger than %d bytes; a secret file holds one token or key", ErrUnresolved, name, MaxFile)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("%w: ${file:%s}: the file is empty", ErrUnresolved, name)
		}
		return v, nil
	}
	return "", fmt.Errorf("%w: unknown kind %q", ErrUnresolved, kind)
}
