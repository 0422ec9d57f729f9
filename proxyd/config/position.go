package config

import (
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Entry is where one item of a top-level list stands in a YAML file.
type Entry struct {
	Line, Column int    // 1-based: the item's dash, or its first token
	Name         string // the item's "name" value; "" when it has none
}

// ListEntries locates the items of the top-level list key (the config's
// servers, a probe targets file's targets) in data, in order, so that a
// finding about one of them can point at the line that declares it. Nil
// when data does not parse or has no such list.
func ListEntries(data []byte, key string) []Entry {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil
	}
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		root, _ := mappingValues(unwrap(d.Body))
		for _, mv := range root {
			if keyText(mv.Key) != key {
				continue
			}
			seq, ok := unwrap(mv.Value).(*ast.SequenceNode)
			if !ok {
				return nil
			}
			out := make([]Entry, len(seq.Values))
			for i, v := range seq.Values {
				p := tokenPos(v.GetToken())
				if i < len(seq.Entries) && seq.Entries[i] != nil {
					if dash := tokenPos(seq.Entries[i].Start); dash.line > 0 {
						p = dash
					}
				}
				out[i] = Entry{Line: p.line, Column: p.col}
				fields, _ := mappingValues(unwrap(v))
				for _, fv := range fields {
					if keyText(fv.Key) == "name" {
						if s, ok := unwrap(fv.Value).(ast.ScalarNode); ok {
							if name, ok := s.GetValue().(string); ok {
								out[i].Name = name
							}
						}
					}
				}
			}
			return out
		}
	}
	return nil
}
