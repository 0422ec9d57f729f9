package retryafter

import (
	"testing"
	"time"
)

// Any Retry-After value gives a delay between 0 and Max.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"120", " 5 ", "0", "-1", "1.5", "99999999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "soon", ""} {
		f.Add(s)
	}
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := Parse(v, now); d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %s, want 0..%s", v, d, Max)
		}
	})
}
