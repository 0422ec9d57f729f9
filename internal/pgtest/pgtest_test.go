package pgtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpx-dev/mcpx/internal/waitfor"
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

// The server outlives the thread of the goroutine that started the
// cluster, even when that goroutine is locked to its thread and returns
// (which ends the thread, and would fire the server's Pdeathsig had it
// been started from there).
func TestServerOutlivesStartingThread(t *testing.T) {
	Get(t) // binaries present or skipped
	type started struct {
		c   *Cluster
		tid int
		err error
	}
	var s started
	// held keeps the main thread busy once a try lands on it, so the next
	// try runs on another thread.
	held := make(chan struct{})
	defer close(held)
	for range 50 {
		done := make(chan started, 1)
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == os.Getpid() {
				// The main thread never ends (the runtime parks it
				// instead): hold it and try again on another.
				done <- started{}
				<-held
				runtime.UnlockOSThread()
				return
			}
			// Never unlocked: the thread ends when this returns.
			c, err := Start()
			done <- started{c, syscall.Gettid(), err}
		}()
		if s = <-done; s.c != nil || s.err != nil {
			break
		}
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	if s.c == nil {
		t.Fatal("every try ran on the main thread")
	}
	defer s.c.Stop()
	// Wait until the thread is gone (the kernel sends Pdeathsig as it ends).
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	waitfor.True(t, 10*time.Second, fmt.Sprintf("thread %d to end", s.tid), func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
	ctx := context.Background()
	for i := range 5 {
		conn, err := pgx.Connect(ctx, s.c.DSN("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		if err != nil {
			t.Fatalf("connection %d after the starting thread ended: %v", i, err)
		}
	}
	select {
	case <-s.c.exited:
		t.Fatalf("server exited after the starting thread ended: %s", s.c.logTail())
	default:
	}
}
