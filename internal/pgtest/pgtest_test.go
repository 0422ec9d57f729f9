package pgtest

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Two databases of one cluster are separate, and the server is not root.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := Database(t), Database(t)
	if a == b {
		t.Fatalf("same DSN twice: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("table of database a seen in b: %d %v", n, err)
	}
	var ver string
	if err := ca.QueryRow(ctx, "SHOW server_version").Scan(&ver); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s", ver)
}

// Stop ends the server and removes its directory; the cluster of a stopped
// harness is gone from disk.
func TestStartStop(t *testing.T) {
	Get(t) // binaries present or skipped
	c, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	pid := c.cmd.Process.Pid
	if os.Geteuid() == 0 {
		st, err := os.Stat(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Error("cluster directory owned by root; the server must run as another user")
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir still there: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("server %d still running", pid)
	}
}
