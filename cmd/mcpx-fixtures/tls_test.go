package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

func TestRunTLSList(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"tls", "--list"}, &out, io.Discard); err != nil {
		t.Fatalf("tls --list: %v", err)
	}
	for _, k := range tlsfixtures.Kinds {
		if !strings.Contains(out.String(), k) {
			t.Errorf("--list lacks %s", k)
		}
	}
	if err := run(context.Background(), []string{"tls", "--kind", "nope"}, io.Discard, io.Discard); exitCode(err) != 2 {
		t.Errorf("unknown kind: %v, want a usage error", err)
	}
}

func TestRunTLSServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"tls", "--kind", tlsfixtures.KindExpired}, pw, io.Discard)
		pw.Close()
	}()
	ready := readReady(t, pr, "url", "ca_file", "expect")
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	rep := probe.Run(context.Background(), probe.Options{Target: ready["url"], CAFile: ready["ca_file"]})
	if got := rep.Result.Code + "/" + rep.Result.Reason; got != ready["expect"] {
		t.Errorf("probe says %s, fixture expects %s", got, ready["expect"])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tls: %v", err)
	}
	if _, err := os.Stat(ready["ca_file"]); !os.IsNotExist(err) {
		t.Errorf("CA file left behind: %v", err)
	}
}
