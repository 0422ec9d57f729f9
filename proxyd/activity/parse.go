package activity

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
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
		{"status", f.Statuses, Statuses},
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

// SplitList turns repeated and comma-separated flag values into one list,
// trimmed, without empties or duplicates.
func SplitList(values []string) []string {
	var out []string
	for _, v := range values {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// ParseTime reads a --since/--until value: a duration before now ("90s",
// "1h", "2d" for days) or an RFC 3339 time (with or without fractional
// seconds, or a bare date).
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err == nil && fmt.Sprint(n) == d && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("time %q: durations count back from now and must not be negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want a duration such as 30m, 1h or 7d, or an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
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

// SetOutcome fills the record's status and classification fields from c.
func (r *Record) SetOutcome(c callerr.Classification) {
	r.Status = StatusOK
	if !c.OK() {
		r.Status = StatusError
	}
	r.ErrorClass, r.FaultDomain, r.UpstreamHTTPStatus, r.Reason = c.Class, c.Domain, c.HTTPStatus, c.Reason
}
