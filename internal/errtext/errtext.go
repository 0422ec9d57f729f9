// Package errtext tidies error text for people: the chains that libraries
// wrap ("failed to send request: failed to send request: EOF") without
// the links that repeat.
package errtext

import "strings"

// Dedupe drops a link of an error chain (": "-separated) that repeats the
// one before it, ignoring case. Line breaks are kept.
func Dedupe(s string) string {
	links := strings.Split(s, ": ")
	out := links[:0]
	for _, l := range links {
		if len(out) > 0 && strings.EqualFold(strings.TrimSpace(out[len(out)-1]), strings.TrimSpace(l)) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, ": ")
}
