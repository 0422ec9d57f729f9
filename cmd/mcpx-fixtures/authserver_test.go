package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRunAuthServerUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"non-loopback addr", []string{"authserver", "--addr", "0.0.0.0:0"}},
		{"stray argument", []string{"authserver", "extra"}},
		{"unknown flag", []string{"authserver", "--nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), tt.args, &out, io.Discard); !errors.Is(err, errUsage) {
				t.Fatalf("run(%q) = %v, want a usage error", tt.args, err)
			}
		})
	}
}

func TestRunAuthServerInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"authserver", "--no-registration", "--client", "cfg:s3cret"}, pw, io.Discard)
		pw.Close()
	}()
	ready := readReady(t, pr, "url", "metadata", "control")
	if !strings.HasPrefix(ready["url"], "http://127.0.0.1:") {
		t.Fatalf("url %q", ready["url"])
	}
	resp, err := http.Get(ready["metadata"])
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	err = json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if err != nil || md["issuer"] != ready["url"] || md["registration_endpoint"] != nil {
		t.Fatalf("metadata %v %v", md, err)
	}
	resp, err = http.Post(ready["control"]+"fail?kind=invalid_grant", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
