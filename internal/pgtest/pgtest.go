// Package pgtest starts a private PostgreSQL cluster for tests: initdb into
// a temporary directory, a server listening only on a Unix socket in that
// directory, one fresh database per test, and the whole cluster removed
// when the test binary ends. No shared server is ever used.
//
// A package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Run as root, the cluster runs as an unprivileged user (postgres when it
// exists, else nobody), since PostgreSQL refuses to run as root.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpx-dev/mcpx/internal/tied"
)

// EnvRequire, when set to 1, turns missing PostgreSQL binaries from a skip
// into a failure ('make test' sets it).
const EnvRequire = "MCPX_REQUIRE_POSTGRES"

// EnvBinDir names the directory of initdb and postgres, overriding the
// search.
const EnvBinDir = "MCPX_POSTGRES_BIN"

// User is the database role of the cluster's superuser.
const User = "mcpx"

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir     string // temporary root: data/ and the socket
	sockDir string
	cmd     *exec.Cmd
	exited  <-chan struct{}
	log     *os.File
	seq     atomic.Int64
}

// ErrNoBinaries means initdb or postgres was not found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries not found (install postgresql-15, or set " + EnvBinDir + ")")

// BinDir finds the directory holding initdb and postgres: $MCPX_POSTGRES_BIN,
// the newest /usr/lib/postgresql/*/bin, or the directory of initdb on PATH.
func BinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%s=%s: %w", EnvBinDir, dir, ErrNoBinaries)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", ErrNoBinaries
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start creates and starts a cluster under a new temporary directory. The
// caller must Stop it.
func Start() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: the server's user must be able to reach it.
	dir, err := os.MkdirTemp("", "mcpx-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: temp dir: %w", err)
	}
	c := &Cluster{dir: dir, sockDir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres: hand %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", User, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: initdb: %w: %s", err, tail(out))
	}
	c.log, err = os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Durability is not what the tests measure: no fsync, and no TCP.
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", c.sockDir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB",
		"-c", "unix_socket_permissions=0777")
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	// The server dies with the test binary even when it is killed.
	if c.exited, err = tied.Start(c.cmd); err != nil {
		_ = c.log.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("postgres: start server: %w", err)
	}
	if err := c.waitReady(30 * time.Second); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// runAs is the credential of the server's user when we are root, else nil
// (run as ourselves).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("postgres: running as root and neither a postgres nor a nobody user exists to run the server as")
}

// waitReady polls until the server accepts a connection.
func (c *Cluster) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-c.exited:
			return fmt.Errorf("postgres: server exited: %s", c.logTail())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres: not ready after %s: %v: %s", timeout, last, c.logTail())
		}
	}
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	return tail(b)
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// SocketDir is the directory of the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.sockDir }

// DSN is the connection URL of database db over the Unix socket.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&sslmode=disable", User, db, c.sockDir)
}

// CreateDatabase creates a new, empty database and returns its DSN.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.seq.Add(1))
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("postgres: create database: %w", err)
	}
	return c.DSN(name), nil
}

// Stop shuts the server down (fast mode) and removes the cluster.
func (c *Cluster) Stop() error {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	if c.log != nil {
		_ = c.log.Close()
	}
	return os.RemoveAll(c.dir)
}

// The package's shared cluster, started on first use inside Main.
var (
	inMain  atomic.Bool
	mu      sync.Mutex
	shared  *Cluster
	initErr error
)

// Main runs the tests and stops the cluster if one was started.
func Main(m *testing.M) int {
	inMain.Store(true)
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: removing the cluster: %v\n", err)
		}
		shared = nil
	}
	return code
}

// Get returns the package's cluster, starting it on first use. Without the
// binaries the test is skipped, or fails when MCPX_REQUIRE_POSTGRES=1.
func Get(tb testing.TB) *Cluster {
	tb.Helper()
	if !inMain.Load() {
		tb.Fatal("pgtest: the package's TestMain must run its tests through pgtest.Main")
	}
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && initErr == nil {
		shared, initErr = Start()
	}
	if initErr != nil {
		if errors.Is(initErr, ErrNoBinaries) && os.Getenv(EnvRequire) != "1" {
			tb.Skipf("pgtest: %v", initErr)
		}
		tb.Fatalf("pgtest: %v", initErr)
	}
	return shared
}

// Database returns the DSN of a new, empty database on the package's
// cluster.
func Database(tb testing.TB) string {
	tb.Helper()
	c := Get(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := c.CreateDatabase(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return dsn
}
