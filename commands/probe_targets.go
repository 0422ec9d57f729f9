package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/internal/report"
	"github.com/mcpx-dev/mcpx/internal/secretref"
	"github.com/mcpx-dev/mcpx/probe"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// probeTarget is one endpoint to probe and what its result should be.
type probeTarget struct {
	Name   string // a server name, the name given in the file, or the URL
	Req    api.ProbeRequest
	Expect string // a probe result code; "" means ok or auth_required
	// Source is the line that declares the target (its entry in the
	// targets file or the config), where CI reports locate its findings.
	Source *report.Source
}

// targetsFile is the --file format:
//
//	targets:
//	  - url: https://mcp.example.com/mcp
//	    name: example
//	    expect: auth_required
//	    headers: {X-Api-Key: "${env:EXAMPLE_KEY}"}
//	  - server: docs            # a configured server, with its settings
type targetsFile struct {
	Targets []fileTarget `yaml:"targets"`
}

type fileTarget struct {
	Name      string            `yaml:"name"`
	URL       string            `yaml:"url"`
	Server    string            `yaml:"server"`
	Expect    string            `yaml:"expect"`
	Headers   map[string]string `yaml:"headers"`
	CAFile    string            `yaml:"ca_file"`
	Transport string            `yaml:"transport"`
	Protocol  string            `yaml:"protocol"`
	Timeout   config.Duration   `yaml:"timeout"`
}

// maxTargets bounds one probe run, maxTargetsFile the file that lists
// them.
const (
	maxTargets     = 500
	maxTargetsFile = 1 << 20
)

// probeCodes are the result codes --expect accepts.
var probeCodes = []string{probe.CodeOK, probe.CodeAuthRequired, probe.CodeAuthMisconfigured, probe.CodeDNSFailure,
	probe.CodeConnectionUnreachable, probe.CodeTimeout, probe.CodeTLSCertificate, probe.CodeTLSProtocol,
	probe.CodeHTTPStatus, probe.CodeNotMCP}

func checkExpect(where, code string) error {
	if code == "" || slices.Contains(probeCodes, code) {
		return nil
	}
	return usageErr("%s: expect %q is not a probe result code (%s)", where, code, strings.Join(probeCodes, ", "))
}

// probeTargets collects the targets of one run: the positional URLs and
// server names, every configured network server (--all), and the entries
// of --file, in that order.
func probeTargets(c *cli.Context) ([]probeTarget, error) {
	expect := c.String("expect")
	if err := checkExpect("--expect", expect); err != nil {
		return nil, err
	}
	var out []probeTarget
	for _, arg := range c.Args().Slice() {
		req, err := probeRequest(c, arg)
		if err != nil {
			return nil, err
		}
		t := probeTarget{Name: targetName(req), Req: req, Expect: expect}
		if req.Server != "" {
			t.Source = serverSource(c, req.Server)
		}
		out = append(out, t)
	}
	if c.Bool("all") {
		cfg, err := config.Load(configPath(c))
		if err != nil {
			return nil, exitErr(ExitConfig, fmt.Errorf("--all needs the config: %w", err))
		}
		n := 0
		for _, s := range cfg.Servers {
			if s.URL == "" {
				errorf(c, "probe: skipping %s: transport %s has no URL to probe\n", s.Name, s.EffectiveTransport())
				continue
			}
			req, err := probeRequest(c, s.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, probeTarget{Name: s.Name, Req: req, Expect: expect, Source: serverSource(c, s.Name)})
			n++
		}
		if n == 0 {
			return nil, usageErr("--all: the config at %s has no network server to probe", configPath(c))
		}
	}
	if f := c.String("file"); f != "" {
		fromFile, err := fileTargets(c, f, expect)
		if err != nil {
			return nil, err
		}
		out = append(out, fromFile...)
	}
	if len(out) == 0 {
		return nil, usageErr("probe needs a TARGET (a URL or a configured server name), --all or --file FILE")
	}
	if len(out) > maxTargets {
		return nil, usageErr("%d targets: at most %d per run", len(out), maxTargets)
	}
	return out, nil
}

// targetName is how a target is called in summaries: its server name, or
// its (redacted) URL.
func targetName(r api.ProbeRequest) string {
	if r.Server != "" {
		return r.Server
	}
	return redact.URL(r.Target)
}

// fileTargets reads a targets file. Header values may be ${env:NAME} or
// ${file:PATH} references (relative paths from the file's directory), so
// the file itself holds no secret.
func fileTargets(c *cli.Context, path, expect string) ([]probeTarget, error) {
	if st, err := os.Stat(path); err == nil && st.Size() > maxTargetsFile {
		return nil, usageErr("--file %s: larger than %d bytes; a targets file lists at most %d targets", path, maxTargetsFile, maxTargets)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErr("--file: %v", err)
	}
	var tf targetsFile
	if err := yaml.UnmarshalWithOptions(b, &tf, yaml.Strict()); err != nil {
		return nil, usageErr("--file: %v", config.YAMLError(path, err))
	}
	if len(tf.Targets) == 0 {
		return nil, usageErr("--file %s: no targets (the file needs a 'targets:' list)", path)
	}
	dir := filepath.Dir(path)
	entries := config.ListEntries(b, "targets")
	var out []probeTarget
	for i, ft := range tf.Targets {
		where := fmt.Sprintf("%s: target %d", path, i+1)
		if (ft.URL == "") == (ft.Server == "") {
			return nil, usageErr("%s: give either url or server", where)
		}
		arg := ft.URL
		if arg == "" {
			arg = ft.Server
		} else if !looksLikeURL(arg) {
			return nil, usageErr("%s: url must be an absolute http:// or https:// URL", where)
		}
		req, err := probeRequest(c, arg)
		if err != nil {
			return nil, err
		}
		for k, v := range ft.Headers {
			if strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t:") {
				return nil, usageErr("%s: header name %q is not valid", where, k)
			}
			val, err := secretref.ExpandFrom(v, dir)
			if err != nil {
				return nil, usageErr("%s: header %s: %v", where, k, err)
			}
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			req.Headers[k] = val
		}
		if ft.CAFile != "" {
			p := ft.CAFile
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if req.CAFile, err = filepath.Abs(p); err != nil {
				return nil, usageErr("%s: ca_file: %v", where, err)
			}
		}
		if ft.Transport != "" {
			req.Transport = ft.Transport
		}
		if ft.Protocol != "" {
			req.Protocol = ft.Protocol
		}
		if ft.Timeout > 0 {
			req.TimeoutMS = time.Duration(ft.Timeout).Milliseconds()
			req.OverallMS = 3 * req.TimeoutMS
		}
		if err := probe.CheckRequest(req); err != nil {
			return nil, usageErr("%s: %v", where, err)
		}
		t := probeTarget{Name: ft.Name, Req: req, Expect: expect}
		if i < len(entries) {
			t.Source = report.SourceOf(path, b, entries[i].Line, entries[i].Column)
		}
		if t.Name == "" {
			t.Name = targetName(req)
		}
		if ft.Expect != "" {
			if err := checkExpect(where, ft.Expect); err != nil {
				return nil, err
			}
			t.Expect = ft.Expect
		}
		out = append(out, t)
	}
	return out, nil
}
