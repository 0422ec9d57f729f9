package replica

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestJoinBeatListLeave(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		a, b := New(db, "a"), New(db, "b")
		b.pid = a.pid + 1 // another process
		for _, r := range []*Registry{a, b} {
			if err := r.Join(ctx, "test", "127.0.0.1:1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Beat(ctx, []string{"docs: ready"}); err != nil {
			t.Fatal(err)
		}
		list, err := a.List(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("list %+v %v", list, err)
		}
		if !list[0].Self || list[0].ID != "a" || list[1].ID != "b" || !list[1].Live || string(list[1].Servers) != `["docs: ready"]` {
			t.Errorf("list %+v", list)
		}

		// The same id from a live process elsewhere is refused.
		c := New(db, "b")
		c.host = "other-host"
		var inUse *InUseError
		if err := c.Join(ctx, "test", ""); !errors.As(err, &inUse) || inUse.PID != b.pid {
			t.Fatalf("duplicate id: %v", err)
		}
		// Once b's row is stale, the id is free again.
		c.now = func() time.Time { return time.Now().Add(Stale + time.Second) }
		if err := c.Join(ctx, "test", ""); err != nil {
			t.Fatalf("stale id not taken over: %v", err)
		}
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		list, _ = c.List(ctx)
		if len(list) != 1 || list[0].ID != "b" || !list[0].Self {
			t.Errorf("after leave: %+v", list)
		}
	})
}

// On one host, a row whose process is gone is taken over at once.
func TestJoinTakesOverDeadProcess(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		dead := New(db, "x")
		dead.pid = 1 << 22 // above pid_max's default: no such process
		if err := dead.Join(ctx, "test", ""); err != nil {
			t.Fatal(err)
		}
		if err := New(db, "x").Join(ctx, "test", ""); err != nil {
			t.Fatalf("row of a dead process not taken over: %v", err)
		}
	})
}
