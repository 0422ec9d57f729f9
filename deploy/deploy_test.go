// Package deploy holds service definitions for proxyd: systemd (system and
// user), launchd, and a Kubernetes example. The test keeps them runnable
// with this build: their commands and flags exist, the config they carry
// validates, and the probes point at the metrics listener.
package deploy

import (
	"encoding/xml"
	"os"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

func TestSystemdUnits(t *testing.T) {
	for _, p := range []string{"systemd/mcpx-proxyd.service", "systemd/user/mcpx-proxyd.service"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{"[Service]", "ExecStart=", "mcpx proxyd", "KillSignal=SIGTERM", "[Install]"} {
			if !strings.Contains(strings.ReplaceAll(s, "/usr/local/bin/mcpx proxyd", "mcpx proxyd"), want) &&
				!strings.Contains(strings.ReplaceAll(s, "%h/.local/bin/mcpx proxyd", "mcpx proxyd"), want) {
				t.Errorf("%s lacks %q", p, want)
			}
		}
	}
}

func TestLaunchdPlist(t *testing.T) {
	b, err := os.ReadFile("launchd/dev.mcpx.proxyd.plist")
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(b)))
	d.Strict = true
	var args []string
	inArgs := false
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case xml.CharData:
			if strings.TrimSpace(string(v)) == "ProgramArguments" {
				inArgs = true
			} else if inArgs && strings.TrimSpace(string(v)) != "" {
				args = append(args, strings.TrimSpace(string(v)))
			}
		case xml.EndElement:
			if v.Name.Local == "array" {
				inArgs = false
			}
		}
	}
	if len(args) != 2 || !strings.HasSuffix(args[0], "/mcpx") || args[1] != "proxyd" {
		t.Errorf("ProgramArguments %v", args)
	}
}

func TestKubernetesExample(t *testing.T) {
	b, err := os.ReadFile("kubernetes/mcpx-fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var deployment map[string]any
	var cfgText string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("YAML: %v", err)
		}
		switch m["kind"] {
		case "ConfigMap":
			cfgText = m["data"].(map[string]any)["config.yaml"].(string)
		case "Deployment":
			deployment = m
		}
	}
	cfg, err := config.Parse("config.yaml", []byte(cfgText))
	if err != nil {
		t.Fatalf("the example's config does not validate: %v", err)
	}
	if cfg.MetricsListen == "" || !strings.Contains(cfg.State.Postgres, "${env:PGPASSWORD}") {
		t.Errorf("config: metrics_listen %q, state %q", cfg.MetricsListen, cfg.State.Postgres)
	}
	spec := deployment["spec"].(map[string]any)
	if n, _ := spec["replicas"].(uint64); n < 2 {
		t.Errorf("replicas %v", spec["replicas"])
	}
	text := string(b)
	for _, want := range []string{"secretKeyRef", "name: PGPASSWORD", "name: MCPX_REPLICA", "path: /livez", "path: /readyz", "containerPort: 9464"} {
		if !strings.Contains(text, want) {
			t.Errorf("the example lacks %q", want)
		}
	}
}
