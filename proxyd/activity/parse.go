package activity

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
)

// InvalidValueError is a filter value outside its vocabulary.
type InvalidValueError struct {
	Field   string // "status", "error class", "fault domain"
	Value   string
	Allowed []string
}

func (e *InvalidValueError) Error() string {
	msg := fmt.Sprintf("unknown %s %q: want one of %s", e.Field, e.Value, strings.Join(e.Allowed, ", "))
	if s := closest(e.Value, e.Allowed); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// Validate checks the filter's statuses, error classes and fault domains
// against their vocabularies, and that Since is not after Until.
func (f Filter) Validate() error {
	for _, c := range []struct {
		field   string
		vals    []string
		allowed []string
	}{
		{"status", f.Statuses, api.CallStatuses},
		{"error class", f.ErrorClasses, callerr.Classes},
		{"fault domain", f.FaultDomains, callerr.Domains},
	} {
		for _, v := range c.vals {
			if !slices.Contains(c.allowed, v) {
				return &InvalidValueError{Field: c.field, Value: v, Allowed: c.allowed}
			}
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Since.After(f.Until) {
		return fmt.Errorf("since (%s) is after until (%s)", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return nil
}

// closest suggests the allowed value nearest to v, if it is near.
func closest(v string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editdistance.Levenshtein(strings.ToLower(v), a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}
