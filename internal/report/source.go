package report

import (
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

// Source is where a target is declared: its entry in a probe targets file
// or in the config. Code scanning places a finding in a file of the
// repository, so a finding about an endpoint points at the line that
// names it.
type Source struct {
	File      string // the file's path as read
	Line      int    // 1-based
	Column    int    // 1-based, in UTF-16 code units (SARIF's default)
	EndColumn int    // exclusive: the end of the entry's first line
}

// SourceOf is the source at 1-based line and column of file, whose text
// is text; nil when the position is not in the text.
func SourceOf(file string, text []byte, line, col int) *Source {
	lines := strings.Split(string(text), "\n")
	if line < 1 || line > len(lines) || col < 1 {
		return nil
	}
	width := len(utf16.Encode([]rune(strings.TrimRight(lines[line-1], "\r"))))
	if col > width {
		return nil
	}
	return &Source{File: file, Line: line, Column: col, EndColumn: width + 1}
}

// Relative is the source's file relative to root, slash-separated, when
// it lies under root; "" when it does not (or either path cannot be made
// absolute).
func (s *Source) Relative(root string) string {
	abs, err := filepath.Abs(s.File)
	if err != nil || root == "" {
		return ""
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// uri is the SARIF artifact location of the source: relative to root
// (SARIF's %SRCROOT%) when the file lies under it, else an absolute file
// URI.
func (s *Source) uri(root string) (uri string, relative bool) {
	if rel := s.Relative(root); rel != "" {
		return (&url.URL{Path: rel}).String(), true
	}
	abs, err := filepath.Abs(s.File)
	if err != nil {
		abs = s.File
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), false
}

// rootURI is root as a directory file URI (with its trailing slash, as
// SARIF's originalUriBaseIds require).
func rootURI(root string) string {
	p := filepath.ToSlash(root)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}
