package retryafter

import (
	"net/http"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"5", 5 * time.Second},
		{" 5 ", 5 * time.Second},
		{"0", 0},
		{"-1", 0},
		{"-3", 0},
		{"soon", 0},
		{"1.5", 0},                     // delay-seconds is digits only
		{"1m", 0},                      // not a Go duration
		{"+5", 0},                      // no sign
		{"3600", time.Hour},            // at the cap
		{"99999", time.Hour},           // capped
		{"999999999999999999999", Max}, // beyond int64
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(3 * time.Hour).Format(http.TimeFormat), time.Hour},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := Parse(tt.in, now); got != tt.want {
			t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestFromResponse(t *testing.T) {
	now := time.Now()
	h := http.Header{"Retry-After": {"7"}}
	for _, tt := range []struct {
		status int
		want   time.Duration
	}{{429, 7 * time.Second}, {503, 7 * time.Second}, {500, 0}, {200, 0}} {
		if got := FromResponse(&http.Response{StatusCode: tt.status, Header: h}, now); got != tt.want {
			t.Errorf("status %d: %v, want %v", tt.status, got, tt.want)
		}
	}
	if FromResponse(nil, now) != 0 {
		t.Error("nil response")
	}
}
