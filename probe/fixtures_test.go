package probe_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/tlsfixtures"
	"github.com/mcpx-dev/mcpx/probe"
)

func probeFixture(t *testing.T, kind string, mutate func(*probe.Options)) *probe.Report {
	t.Helper()
	f, err := tlsfixtures.Start(kind)
	if err != nil {
		t.Fatalf("start fixture: %v", err)
	}
	t.Cleanup(f.Close)
	opts := probe.Options{Target: f.URL, CAFile: f.CAFile, Timeout: 2 * time.Second}
	if mutate != nil {
		mutate(&opts)
	}
	return probe.Run(context.Background(), opts)
}

func TestFixtureKinds(t *testing.T) {
	for _, kind := range tlsfixtures.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			want := tlsfixtures.Expected[kind]
			rep := probeFixture(t, kind, nil)
			b, _ := json.MarshalIndent(rep, "", "  ")
			t.Logf("%s", b)
			got := rep.Result
			if got.Code != want.Code || got.Reason != want.Reason || got.HTTPStatus != want.HTTPStatus {
				t.Errorf("result = %s/%s/%d, want %s/%s/%d", got.Code, got.Reason, got.HTTPStatus, want.Code, want.Reason, want.HTTPStatus)
			}
			if got.Hint == "" || got.Message == "" {
				t.Errorf("result lacks message or hint: %+v", got)
			}
		})
	}
}
