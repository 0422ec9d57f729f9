package activity

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
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

func TestSplitList(t *testing.T) {
	got := SplitList([]string{"a,b", " c ", "a", "", "d,,e"})
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("SplitList = %v, want %v", got, want)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"1h", now.Add(-time.Hour), false},
		{"90s", now.Add(-90 * time.Second), false},
		{"7d", now.Add(-7 * 24 * time.Hour), false},
		{"2026-11-29T08:00:00Z", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), false},
		{"2026-11-29T08:00:00.5+01:00", time.Date(2026, 11, 29, 7, 0, 0, 500_000_000, time.UTC), false},
		{"2026-11-29", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
		{"1.5d", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, now)
		if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSetOutcome(t *testing.T) {
	var r Record
	r.SetOutcome(callerr.Classification{Class: callerr.ClassHTTP, Domain: callerr.DomainUpstream, HTTPStatus: 502, Reason: "why"})
	if r.Status != StatusError || r.ErrorClass != "http" || r.FaultDomain != "upstream" || r.UpstreamHTTPStatus != 502 || r.Reason != "why" {
		t.Errorf("SetOutcome gave %+v", r)
	}
	r.SetOutcome(callerr.Classification{})
	if r.Status != StatusOK || r.ErrorClass != "" || r.UpstreamHTTPStatus != 0 {
		t.Errorf("SetOutcome(success) gave %+v", r)
	}
}
