package redact

import "testing"

func TestControl(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"red \x1b[31mALERT\x1b[0m done", "red ALERT done"},
		{"title \x1b]0;pwned\x07 after", "title  after"},
		{"osc st \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "osc st link"},
		{"bell\x07 back\x08space\rcr", "bell backspacecr"},
		{"c1 \u009b31m csi", "c1 31m csi"},
		{"bidi \u202eevil\u202c", "bidi evil"},
		{"del\x7f", "del"},
		{"unicode ünïcödé ok", "unicode ünïcödé ok"},
		{"bad utf8 \xff end", "bad utf8 \uFFFD end"},
		{"trailing esc \x1b", "trailing esc "},
		{"two-byte \x1bc reset", "two-byte  reset"},
	}
	for _, tt := range tests {
		if got := Control(tt.in); got != tt.want {
			t.Errorf("Control(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzControl(f *testing.F) {
	f.Add("a\x1b[31mb\x1b]0;t\x07c")
	f.Fuzz(func(t *testing.T, s string) {
		out := Control(s)
		for _, r := range out {
			if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control %U left in %q", r, out)
			}
		}
	})
}
