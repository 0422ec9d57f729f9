package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Edits splice the few lines they change into the file's text, so comments
// and formatting elsewhere stay byte for byte. The result is parsed again
// and compared with the intended configuration; when the file's layout is
// one the splice does not handle (flow-style lists, aliases), the whole
// file is re-encoded instead, which loses comments but not settings.

// editMu serialises edits inside one process; lockDir does so across
// processes where the platform has flock.
var editMu sync.Mutex

// AddServer appends s to the file at path, creating the file (and its
// directory, 0700) when missing. It fails when s is invalid or its name is
// taken (errors.Is(err, ErrExists)).
func AddServer(path string, s Server) error {
	if err := (&Config{Servers: []Server{s}}).Validate(); err != nil {
		return fmt.Errorf("add server %q: %w", s.Name, err)
	}
	return edit(path, func(c *Config) (splice, error) {
		if _, ok := c.Server(s.Name); ok {
			return nil, fmt.Errorf("add server %q to %s: %w", s.Name, path, ErrExists)
		}
		c.Servers = append(c.Servers, s)
		return func(f *fileLayout) ([]byte, bool) { return f.add(s) }, nil
	})
}

// RemoveServer deletes the server called name; errors.Is(err, ErrNotFound)
// when there is none.
func RemoveServer(path, name string) error {
	return edit(path, func(c *Config) (splice, error) {
		i := c.index(name)
		if i < 0 {
			return nil, fmt.Errorf("remove server %q from %s: %w", name, path, ErrNotFound)
		}
		c.Servers = append(c.Servers[:i:i], c.Servers[i+1:]...)
		return func(f *fileLayout) ([]byte, bool) { return f.remove(i) }, nil
	})
}

// SetServerDisabled sets the server's disabled flag; errors.Is(err,
// ErrNotFound) when there is none. An unchanged flag leaves the file alone.
func SetServerDisabled(path, name string, disabled bool) error {
	return edit(path, func(c *Config) (splice, error) {
		i := c.index(name)
		if i < 0 {
			return nil, fmt.Errorf("set disabled on server %q in %s: %w", name, path, ErrNotFound)
		}
		if c.Servers[i].Disabled == disabled {
			return nil, nil
		}
		c.Servers[i].Disabled = disabled
		return func(f *fileLayout) ([]byte, bool) { return f.setDisabled(i, disabled) }, nil
	})
}

func (c *Config) index(name string) int {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return i
		}
	}
	return -1
}

// edit reads the file, lets change update the decoded configuration and
// return a splice for the text, and writes the result atomically. A nil
// splice without error means nothing to do.
// splice rewrites the file's text for one edit; false means the layout is
// not one it handles.
type splice func(*fileLayout) ([]byte, bool)

func edit(path string, change func(c *Config) (splice, error)) error {
	editMu.Lock()
	defer editMu.Unlock()
	target, err := resolvePath(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	unlock, err := lockDir(filepath.Dir(target))
	if err != nil {
		return err
	}
	defer unlock()

	data, err := os.ReadFile(target)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read config: %w", err)
	}
	c, err := decode(path, data)
	if err != nil {
		return fmt.Errorf("config must parse before it can be edited: %w", err)
	}
	sp, err := change(c)
	if err != nil || sp == nil {
		return err
	}
	out, ok := []byte(nil), false
	if layout, lerr := newFileLayout(data); lerr == nil {
		out, ok = sp(layout)
		ok = ok && sameConfig(out, c)
	}
	if !ok {
		if out, err = encodeConfig(c); err != nil {
			return err
		}
	}
	return writeFileAtomic(target, out)
}

// resolvePath follows a symlinked config file so that the link survives
// the rename.
func resolvePath(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("resolve config symlink: %w", err)
	}
	return target, nil
}

// sameConfig reports whether data decodes to want.
func sameConfig(data []byte, want *Config) bool {
	got, err := decode("", data)
	if err != nil {
		return false
	}
	a, err1 := json.Marshal(got)
	b, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

func encodeConfig(c *Config) ([]byte, error) {
	out, err := yaml.MarshalWithOptions(c, yaml.Indent(2), yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, fsync, rename, then fsync of the directory. The file is 0600:
// it may hold client secrets.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		// Makes the rename durable; some filesystems refuse, which is harmless.
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// fileLayout is what the splices need to know about the file's text.
type fileLayout struct {
	lines   []string // with their line endings
	eol     string
	root    []*ast.MappingValueNode
	rootCol int                   // 1-based column of the top-level keys; 0 when the file is empty
	servers *ast.MappingValueNode // nil when the file has no servers key
	seq     *ast.SequenceNode     // nil when servers is null or not a block list
}

func newFileLayout(data []byte) (*fileLayout, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, err
	}
	l := &fileLayout{lines: strings.SplitAfter(string(data), "\n"), eol: "\n"}
	if bytes.Contains(data, []byte("\r\n")) {
		l.eol = "\r\n"
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			body = unwrap(d.Body)
		}
	}
	if body == nil {
		return l, nil
	}
	switch b := body.(type) {
	case *ast.MappingNode:
		if b.IsFlowStyle {
			return nil, errors.New("flow-style top level")
		}
	case *ast.MappingValueNode:
		if b.IsFlowStyle {
			return nil, errors.New("flow-style top level")
		}
	}
	l.root, _ = mappingValues(body)
	for _, mv := range l.root {
		if l.rootCol == 0 {
			l.rootCol = tokenPos(mv.Key.GetToken()).col
		}
		if keyText(mv.Key) == "servers" {
			l.servers = mv
			if seq, ok := unwrap(mv.Value).(*ast.SequenceNode); ok && !seq.IsFlowStyle && len(seq.Entries) == len(seq.Values) {
				l.seq = seq
			}
		}
	}
	return l, nil
}

func (l *fileLayout) text() []byte { return []byte(strings.Join(l.lines, "")) }

// insert puts text lines before line index i (0-based).
func (l *fileLayout) insert(i int, text []string) {
	// A file whose last line lacks a newline would glue onto the insert.
	if i > 0 && i <= len(l.lines) && l.lines[i-1] != "" && !strings.HasSuffix(l.lines[i-1], "\n") {
		l.lines[i-1] += l.eol
	}
	rest := append([]string(nil), l.lines[i:]...)
	l.lines = append(append(l.lines[:i], text...), rest...)
}

// entryEnd is the 0-based index of the last line that belongs to the list
// entry whose dash is on line start at 0-based column col: every following
// line indented deeper, blank lines in between.
func (l *fileLayout) entryEnd(start, col int) int {
	end := start
	for j := start + 1; j < len(l.lines); j++ {
		t := strings.TrimRight(l.lines[j], "\r\n")
		trimmed := strings.TrimLeft(t, " ")
		if trimmed == "" {
			continue
		}
		if len(t)-len(trimmed) <= col {
			break
		}
		end = j
	}
	return end
}

// entryLines renders s as a block list entry with its dash at indent.
func (l *fileLayout) entryLines(s Server, indent int) ([]string, bool) {
	b, err := yaml.MarshalWithOptions(s, yaml.Indent(2), yaml.IndentSequence(true))
	if err != nil {
		return nil, false
	}
	pad := strings.Repeat(" ", indent)
	var out []string
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		lead := pad + "  "
		if i == 0 {
			lead = pad + "- "
		}
		out = append(out, lead+line+l.eol)
	}
	return out, true
}

var nullServersLine = regexp.MustCompile(`^(\s*servers\s*:)\s*(?:null|Null|NULL|~|\[\s*\])?\s*(#.*)?$`)

func (l *fileLayout) add(s Server) ([]byte, bool) {
	switch {
	case l.seq != nil && len(l.seq.Entries) > 0:
		last := l.seq.Entries[len(l.seq.Entries)-1]
		p := tokenPos(last.Start)
		first := tokenPos(l.seq.Entries[0].Start)
		entry, ok := l.entryLines(s, first.col-1)
		if !ok {
			return nil, false
		}
		l.insert(l.entryEnd(p.line-1, p.col-1)+1, entry)
	case l.servers != nil:
		// servers: with nothing, null or [] after it.
		kp := tokenPos(l.servers.Key.GetToken())
		i := kp.line - 1
		m := nullServersLine.FindStringSubmatch(strings.TrimRight(l.lines[i], "\r\n"))
		if m == nil {
			return nil, false
		}
		keyLine := m[1]
		if m[2] != "" {
			keyLine += " " + m[2]
		}
		l.lines[i] = keyLine + l.eol
		entry, ok := l.entryLines(s, kp.col-1+2)
		if !ok {
			return nil, false
		}
		l.insert(i+1, entry)
	default:
		col := max(l.rootCol, 1)
		entry, ok := l.entryLines(s, col-1+2)
		if !ok {
			return nil, false
		}
		text := append([]string{strings.Repeat(" ", col-1) + "servers:" + l.eol}, entry...)
		l.insert(len(l.lines), text)
	}
	return l.text(), true
}

func (l *fileLayout) remove(i int) ([]byte, bool) {
	if l.seq == nil || i >= len(l.seq.Entries) {
		return nil, false
	}
	p := tokenPos(l.seq.Entries[i].Start)
	start := p.line - 1
	// The dash must open its line, else the entry shares it with something.
	if strings.TrimSpace(l.lines[start][:p.col-1]) != "" {
		return nil, false
	}
	end := l.entryEnd(start, p.col-1)
	l.lines = append(l.lines[:start], l.lines[end+1:]...)
	return l.text(), true
}

func (l *fileLayout) setDisabled(i int, disabled bool) ([]byte, bool) {
	if l.seq == nil || i >= len(l.seq.Values) {
		return nil, false
	}
	entry := unwrap(l.seq.Values[i])
	if m, ok := entry.(*ast.MappingNode); ok && m.IsFlowStyle {
		return nil, false
	}
	values, ok := mappingValues(entry)
	if !ok {
		return nil, false
	}
	word := "false"
	if disabled {
		word = "true"
	}
	var name *ast.MappingValueNode
	for _, mv := range values {
		switch keyText(mv.Key) {
		case "disabled":
			tk := mv.Value.GetToken()
			p := tokenPos(tk)
			if tk == nil || p.line == 0 {
				return nil, false
			}
			line := l.lines[p.line-1]
			if !disabled && strings.TrimSpace(line) == "disabled: "+tk.Value && p.line > tokenPos(l.seq.Entries[i].Start).line {
				// A line of its own that only said "disabled": drop it.
				l.lines = append(l.lines[:p.line-1], l.lines[p.line:]...)
				return l.text(), true
			}
			at := p.col - 1
			if at > len(line) || !strings.HasPrefix(line[at:], tk.Value) {
				return nil, false
			}
			l.lines[p.line-1] = line[:at] + word + line[at+len(tk.Value):]
			return l.text(), true
		case "name":
			name = mv
		}
	}
	if name == nil || !disabled {
		return nil, false
	}
	kp := tokenPos(name.Key.GetToken())
	l.insert(kp.line, []string{strings.Repeat(" ", kp.col-1) + "disabled: true" + l.eol})
	return l.text(), true
}
