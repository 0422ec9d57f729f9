package mediatype

import (
	"mime"
	"testing"
)

func TestOf(t *testing.T) {
	for _, v := range []string{"application/json", "text/event-stream", "Application/JSON", "application/json; charset=utf-8", "text/event-stream;charset=utf-8", "", "garbage/", ";", "text/html"} {
		want, _, _ := mime.ParseMediaType(v)
		if got := Of(v); got != want {
			t.Errorf("Of(%q) = %q, want %q", v, got, want)
		}
	}
}
