package activity

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		f    Filter
		want string // substring of the error; "" for valid
	}{
		{"empty", Filter{}, ""},
		{"all valid", Filter{Statuses: []string{"ok"}, ErrorClasses: []string{"http", "tool_error"}, FaultDomains: []string{"upstream"}}, ""},
		{"typo domain", Filter{FaultDomains: []string{"upstrem"}}, `unknown fault domain "upstrem": want one of upstream, proxy, client (did you mean "upstream"?)`},
		{"bad class", Filter{ErrorClasses: []string{"kaboom"}}, `unknown error class "kaboom"`},
		{"bad status", Filter{Statuses: []string{"failed"}}, `unknown status "failed"`},
		{"since after until", Filter{Since: t0, Until: t0.Add(-time.Hour)}, "is after until"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	var ive *InvalidValueError
	if err := (Filter{Statuses: []string{"x"}}).Validate(); !errors.As(err, &ive) || ive.Field != "status" {
		t.Errorf("not an InvalidValueError: %v", err)
	}
}
