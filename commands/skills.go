package commands

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var skillsCommand = &cli.Command{
	Name:      "skills",
	Usage:     "list a server's skills, or load one with every file verified (SEP-2640)",
	ArgsUsage: "SERVER [SKILL]",
	Description: `Without SKILL, lists the skills SERVER offers (the skills extension's
skills/list) with their files; no file is read. With SKILL (its name or
URI), loads it: reads its SKILL.md and then each file its entry lists,
through proxyd, and checks every file against the entry: the byte size,
the sha256 digest, and SKILL.md's YAML frontmatter field by field. The
first file that fails stops the load (nothing after it is read) and the
command exits 4 saying which check failed; a skill that passes prints its
SKILL.md.

Examples:
   mcpx skills docs
   mcpx skills docs pdf-processing
   mcpx skills docs skill://pdf-processing/SKILL.md -o json`,
	Flags: []cli.Flag{
		outputFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up on each request after `DURATION`", DefaultText: "the server's call timeout"},
	},
	BashComplete: completeServers,
	Action:       runSkills,
}

// skill is an entry of skills/list.
type skill struct {
	URI         string         `json:"uri"`
	Frontmatter map[string]any `json:"frontmatter"`
	Resources   []skillFile    `json:"resources"`
}

type skillFile struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   *int64 `json:"size,omitempty"`
}

func (s skill) name() string {
	n, _ := s.Frontmatter["name"].(string)
	return n
}

// skillLoad is what mcpx skills SERVER SKILL reports.
type skillLoad struct {
	Server   string       `json:"server"`
	Skill    string       `json:"skill"`
	URI      string       `json:"uri"`
	Files    []loadedFile `json:"files"`
	Verified bool         `json:"verified"`
	Error    string       `json:"error,omitempty"`
	Content  string       `json:"content,omitempty"` // SKILL.md, once verified
}

type loadedFile struct {
	URI    string `json:"uri"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

func runSkills(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageErr("skills needs SERVER, and optionally one SKILL (see 'mcpx skills --help')")
	}
	if _, err := format(c); err != nil {
		return err
	}
	server := c.Args().Get(0)
	res, err := sendRPC(c, api.RPCRequest{Server: server, Method: "skills/list"})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return rpcOutcome(c, res, nil)
	}
	var list struct {
		Skills []skill `json:"skills"`
	}
	if err := decodeResult(res, &list); err != nil {
		return err
	}
	if c.NArg() == 1 {
		return render(c, list.Skills, func(w io.Writer) error {
			if len(list.Skills) == 0 {
				emptyNote(w, server+" offers no skills.")
				return nil
			}
			t := newTable(w, "SKILL", "DESCRIPTION", "URI", "FILES")
			for _, s := range list.Skills {
				desc, _ := s.Frontmatter["description"].(string)
				_ = t.Append([]string{redact.Control(s.name()), t.Fit(redact.Control(desc), 60, oneLine), redact.Control(s.URI), fmt.Sprint(len(s.Resources))})
			}
			return t.Render()
		})
	}
	want := c.Args().Get(1)
	for _, s := range list.Skills {
		if s.name() == want || s.URI == want {
			return loadSkill(c, server, s)
		}
	}
	return exitErr(ExitUsage, fmt.Errorf("%s offers no skill %q (see 'mcpx skills %s')", server, want, server))
}

// loadSkill reads the skill's SKILL.md and then its other files,
// verifying each against the entry before reading the next.
func loadSkill(c *cli.Context, server string, s skill) error {
	out := skillLoad{Server: server, Skill: s.name(), URI: s.URI, Files: []loadedFile{}}
	fail := func(err error) error {
		out.Error = err.Error()
		if rerr := render(c, out, func(w io.Writer) error { return nil }); rerr != nil {
			return rerr
		}
		return exitErr(ExitCallFailed, fmt.Errorf("skill %s of %s not loaded: %w", redact.Control(s.name()), server, err))
	}
	files := []skillFile{{URI: s.URI}}
	for _, f := range s.Resources {
		if f.URI == s.URI {
			files[0] = f
			continue
		}
		files = append(files, f)
	}
	for i, f := range files {
		body, err := readSkillFile(c, server, f.URI)
		if err != nil {
			return fail(err)
		}
		lf, err := verifySkillFile(f, body)
		if err != nil {
			return fail(err)
		}
		if i == 0 {
			if err := checkFrontmatter(s, body); err != nil {
				return fail(err)
			}
			out.Content = string(body)
		}
		out.Files = append(out.Files, lf)
	}
	out.Verified = true
	return render(c, out, func(w io.Writer) error {
		fmt.Fprintf(w, "Loaded skill %s of %s: %d file(s), sizes and digests verified.\n\n", redact.Control(out.Skill), server, len(out.Files))
		fmt.Fprint(w, redact.Control(out.Content))
		return nil
	})
}

// readSkillFile reads one file through proxyd (resources/read).
func readSkillFile(c *cli.Context, server, uri string) ([]byte, error) {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	res, err := sendRPC(c, api.RPCRequest{Server: server, Method: "resources/read", Params: params})
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, fmt.Errorf("reading %s: %s", uri, res.Error.Message)
	}
	var r struct {
		Contents []struct {
			Text *string `json:"text"`
			Blob *string `json:"blob"`
		} `json:"contents"`
	}
	if err := decodeResult(res, &r); err != nil {
		return nil, err
	}
	if len(r.Contents) != 1 {
		return nil, fmt.Errorf("reading %s: %d contents, want 1", uri, len(r.Contents))
	}
	switch cc := r.Contents[0]; {
	case cc.Text != nil:
		return []byte(*cc.Text), nil
	case cc.Blob != nil:
		b, err := base64.StdEncoding.DecodeString(*cc.Blob)
		if err != nil {
			return nil, fmt.Errorf("reading %s: blob is not base64", uri)
		}
		return b, nil
	}
	return nil, fmt.Errorf("reading %s: neither text nor blob", uri)
}

// verifySkillFile checks body against its entry: size, then digest.
func verifySkillFile(f skillFile, body []byte) (loadedFile, error) {
	sum := sha256.Sum256(body)
	got := "sha256:" + hex.EncodeToString(sum[:])
	lf := loadedFile{URI: f.URI, Size: int64(len(body)), Digest: got}
	if f.Size != nil && *f.Size != lf.Size {
		return lf, fmt.Errorf("%s is %d bytes, its entry says %d: size mismatch", f.URI, lf.Size, *f.Size)
	}
	if f.Digest == "" {
		return lf, fmt.Errorf("%s has no digest in its entry: cannot verify it", f.URI)
	}
	if !strings.EqualFold(f.Digest, got) {
		return lf, fmt.Errorf("%s does not match its entry's digest (%s, got %s)", f.URI, redact.Control(f.Digest), got)
	}
	return lf, nil
}

// checkFrontmatter compares SKILL.md's YAML frontmatter with the entry's,
// field by field.
func checkFrontmatter(s skill, body []byte) error {
	text := strings.TrimPrefix(string(body), "\ufeff")
	if !strings.HasPrefix(text, "---\n") && !strings.HasPrefix(text, "---\r\n") {
		return errors.New("SKILL.md has no frontmatter")
	}
	rest := text[strings.Index(text, "\n")+1:]
	end := strings.Index(rest, "\n---")
	if end < 0 {
		return errors.New("SKILL.md's frontmatter is not closed")
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(rest[:end]), &fm); err != nil {
		return fmt.Errorf("SKILL.md's frontmatter is not YAML: %v", err)
	}
	norm := func(v any) any {
		b, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(b, &out)
		return out
	}
	for k, v := range s.Frontmatter {
		if !reflect.DeepEqual(norm(fm[k]), norm(v)) {
			return fmt.Errorf("SKILL.md's frontmatter field %q differs from the skill's entry", redact.Control(k))
		}
	}
	for k := range fm {
		if _, ok := s.Frontmatter[k]; !ok {
			return fmt.Errorf("SKILL.md's frontmatter has a field %q the skill's entry does not", redact.Control(k))
		}
	}
	return nil
}
