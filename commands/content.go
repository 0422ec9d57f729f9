package commands

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
)

// content is one MCP content block (tool results, prompt messages) or
// resource contents (resources/read): what people need to read of each.
type content struct {
	Type        string   `json:"type"`
	Text        string   `json:"text"`
	MimeType    string   `json:"mimeType"`
	Data        string   `json:"data"` // base64: image, audio
	URI         string   `json:"uri"`
	Name        string   `json:"name"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Size        *int64   `json:"size"`
	Blob        string   `json:"blob"` // base64: resource contents
	Resource    *content `json:"resource"`
}

// contentPrinter prints content blocks; with a save dir it writes binary
// content there and says where.
type contentPrinter struct {
	w    io.Writer
	save string
	n    int
}

func (p *contentPrinter) print(c content) error {
	switch c.Type {
	case "text":
		fmt.Fprintln(p.w, redact.Control(c.Text))
	case "image", "audio":
		return p.binary("["+c.Type+"]", c.MimeType, c.Data, "")
	case "resource_link":
		line := "[resource_link] " + redact.Control(firstNonEmpty(c.Title, c.Name, c.URI))
		if c.URI != "" {
			line += "  " + redact.Control(c.URI)
		}
		var facts []string
		if c.MimeType != "" {
			facts = append(facts, c.MimeType)
		}
		if c.Size != nil {
			facts = append(facts, byteSize(*c.Size))
		}
		if len(facts) > 0 {
			line += "  (" + strings.Join(facts, ", ") + ")"
		}
		fmt.Fprintln(p.w, line)
		if c.Description != "" {
			fmt.Fprintln(p.w, "  "+oneLine(c.Description, 100))
		}
	case "resource":
		if c.Resource == nil {
			fmt.Fprintln(p.w, "[resource]")
			return nil
		}
		return p.contents(*c.Resource)
	default:
		fmt.Fprintf(p.w, "[%s content]\n", redact.Control(c.Type))
	}
	return nil
}

// contents prints one entry of resources/read (or an embedded resource).
func (p *contentPrinter) contents(r content) error {
	head := "[resource] " + redact.Control(r.URI)
	if r.Blob != "" {
		return p.binary(head, r.MimeType, r.Blob, r.URI)
	}
	if r.MimeType != "" {
		head += "  (" + r.MimeType + ")"
	}
	fmt.Fprintln(p.w, head)
	if r.Text != "" {
		fmt.Fprintln(p.w, redact.Control(r.Text))
	}
	return nil
}

// binary says what base64 data is (type, size) and, with a save dir,
// writes it to a file named after its URI or its position.
func (p *contentPrinter) binary(head, mimeType, b64 string, uri string) error {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		fmt.Fprintf(p.w, "%s %s, not valid base64: %v\n", head, mimeType, err)
		return nil
	}
	line := fmt.Sprintf("%s %s, %s", head, dash(mimeType), byteSize(int64(len(data))))
	if p.save == "" {
		fmt.Fprintln(p.w, line+" (--save DIR writes it to a file)")
		return nil
	}
	p.n++
	path := filepath.Join(p.save, saveName(uri, mimeType, p.n))
	if err := os.MkdirAll(p.save, 0o755); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	fmt.Fprintf(p.w, "%s, saved to %s\n", line, path)
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// saveName is a file name for the n-th saved content: the last part of its
// URI when it has one, else content-N, with an extension for its type.
func saveName(uri, mimeType string, n int) string {
	name := ""
	if uri != "" {
		name = strings.Trim(unsafeName.ReplaceAllString(filepath.Base(strings.TrimRight(uri, "/")), "_"), "._")
	}
	if name == "" {
		name = fmt.Sprintf("content-%d", n)
	} else {
		name = fmt.Sprintf("%d-%s", n, name)
	}
	if filepath.Ext(name) == "" {
		if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
			name += exts[0]
		} else {
			name += ".bin"
		}
	}
	return name
}

func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// printToolResult prints a tools/call result for people: its content
// blocks, and its structured content when there are none.
func printToolResult(w io.Writer, raw json.RawMessage, save string) error {
	if raw == nil {
		return nil
	}
	var r struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		fmt.Fprintln(w, prettyJSON(raw))
		return nil
	}
	p := &contentPrinter{w: w, save: save}
	for _, c := range r.Content {
		if err := p.print(c); err != nil {
			return err
		}
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" && len(r.Content) == 0 {
		fmt.Fprintln(w, prettyJSON(r.StructuredContent))
	}
	return nil
}

// saveFlag is --save DIR of the commands that print content.
var saveFlag = &cli.StringFlag{Name: "save", Usage: "write images, audio and binary resources to files in `DIR`"}
