// Package proxyd is the mcpx daemon: it fronts the user's upstream MCP
// servers, serves their union as one MCP endpoint on loopback, and answers
// the mcpx CLI over a Unix socket.
package proxyd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/downstream"
	"github.com/mcpx-dev/mcpx/proxyd/health"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
	"github.com/mcpx-dev/mcpx/proxyd/replica"
	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/telemetry"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// Options configure a daemon.
type Options struct {
	Socket     string
	ConfigPath string
	StateDir   string
	Version    string
	Logger     *slog.Logger
	// AllowedUID is the only peer uid the socket serves (default: ours).
	AllowedUID *int
	// Ready, when set, is closed once the socket and the MCP endpoint
	// accept connections.
	Ready chan<- struct{}
	// ShutdownTimeout bounds the drain of in-flight calls (default 10s).
	ShutdownTimeout time.Duration
	// Replica names this proxyd among those sharing one state database
	// (default: the host name).
	Replica string

	// Tests' hooks: beforeSync runs before each publish of the endpoint's
	// lists, awaitingList when a status waits for one.
	beforeSync, awaitingList func()
}

// TokenFile is the name of the downstream bearer token file in the state dir.
const TokenFile = "proxyd.token"

// DBFile is the name of the state database in the state dir.
const DBFile = "state.db"

// Daemon is a running proxyd.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	started time.Time
	token   string

	db       *store.DB
	replicas *replica.Registry
	activity *activity.Store
	health   *health.Tracker
	mgr      *upstream.Manager
	down     *downstream.Server
	// endpointTools: each connection's tools as the endpoint takes them
	// (see Upstreams).
	endpointTools endpointTools
	relay         *relay.Relayer
	streamed      streamedCalls // `mcpx call`s streaming their events
	// answered: endpoint calls answered and not yet recorded.
	answered answered
	metrics  *metrics
	tel      *telemetry.Telemetry
	auth     *auth
	// discoverer is the OAuth discovery cache shared by probes and sign-in.
	discoverer *discovery.Discoverer

	cfgMu  sync.RWMutex
	cfg    *config.Config
	cfgErr error
	listen string
	// metricsAddr is where metrics_listen serves, once started.
	metricsAddr string
	shutdown    chan struct{}
	shutOnce    sync.Once
	// socketCalls are the MCP requests on the control socket.
	socketCalls socketCalls

	syncTick chan struct{}
	// listings is what the endpoint has published: status waits for it.
	listings *listings

	// secrets are the config's credentials, kept out of every log line
	// and every text proxyd shows or stores.
	secrets  secrets
	names    namingCache
	beatTick chan struct{} // a server's state changed: publish it to the replicas
}

// Run runs proxyd until ctx is done or a shutdown is requested over the
// socket, then drains in-flight calls, closes upstreams, flushes state and
// removes the socket.
func Run(ctx context.Context, opts Options) error {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.Replica == "" {
		opts.Replica = replica.DefaultID()
	}
	d := &Daemon{opts: opts, log: opts.Logger, started: time.Now(), shutdown: make(chan struct{}), syncTick: make(chan struct{}, 1), listings: newListings(), beatTick: make(chan struct{}, 1)}

	cfg, err := config.Load(opts.ConfigPath)
	if err != nil {
		return fmt.Errorf("loading config: %w", err)
	}
	d.cfg = cfg
	d.secrets.use(cfg)
	d.log = slog.New(redactingHandler{next: d.log.Handler(), s: &d.secrets})
	d.logWarnings(cfg)
	if err := privateDir(opts.StateDir, "state directory", "--state-dir", "the MCP bearer token or the database"); err != nil {
		return err
	}

	// The socket comes first: a second daemon must fail before it touches
	// the database or the listen port.
	sockLn, err := listenSocket(opts.Socket)
	if err != nil {
		return err
	}
	defer sockLn.Close()

	if d.token, err = loadOrCreateToken(filepath.Join(opts.StateDir, TokenFile)); err != nil {
		return err
	}
	if d.db, err = openState(ctx, cfg, opts.StateDir, opts.Replica); err != nil {
		return err
	}
	defer d.db.Close()
	d.replicas = replica.New(d.db, opts.Replica)
	d.activity = activity.NewStore(d.db, activity.Options{MaxAge: time.Duration(cfg.Activity.MaxAge), MaxRows: cfg.Activity.MaxRows, Replica: opts.Replica, Durability: cfg.Activity.Durability})
	d.health = health.NewTracker(time.Now)
	d.replayHealth(ctx, opts.Replica)
	d.metrics = newMetrics()
	if d.tel, err = telemetry.Setup(ctx, telemetry.Options{ServiceVersion: opts.Version, Replica: opts.Replica, Gatherer: d.metrics.reg}); err != nil {
		_ = d.activity.Close()
		return fmt.Errorf("telemetry: %w", err)
	}
	d.discoverer = discovery.New(discovery.NewHTTPClient(nil, 15*time.Second), discovery.WithLogger(d.log))
	d.initAuth()
	d.syncGrants(cfg.Servers)

	d.mgr = upstream.NewManager(upstream.Options{
		Version: opts.Version,
		Logger:  d.log,
		Wrappers: []upstream.Wrapper{
			func(_ string, next http.RoundTripper) http.RoundTripper { return callerr.NewTransport(next) },
			func(_ string, next http.RoundTripper) http.RoundTripper { return d.tel.Transport(next) },
			d.bearerWrapper,
		},
		OnChange: func(string) { d.requestSync() },
		OnNotification: func(server, method string, params json.RawMessage) {
			if d.down != nil {
				d.down.Notify(server, method, params)
			}
		},
		Stderr: func(server string) io.Writer { return &logWriter{log: d.log, server: server} },
	})
	d.relay = relay.New()
	defer d.relay.Close()
	d.down = downstream.New(d, opts.Version, d.log)
	d.down.SetSessionLimits(cfg.Limits.MaxSessions, time.Duration(cfg.Limits.SessionIdleTimeout))
	// The re-init counter lives on each connection; metrics read it there.
	d.metrics.trackConns(d.mgr.List)
	d.metrics.trackStreams(d.down.OpenStreams, d.down.ListenNotificationsDropped)

	listen := cfg.ListenAddr()
	mcpLn, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening for MCP clients on %s: %w (is another proxyd using it? set listen: in the config)", listen, err)
	}
	d.listen = mcpLn.Addr().String()
	metricsSrv, err := d.serveMetrics(cfg.MetricsListen)
	if err != nil {
		_ = mcpLn.Close()
		_ = d.activity.Close()
		return err
	}
	if err := d.replicas.Join(ctx, opts.Version, d.listen); err != nil {
		if metricsSrv != nil {
			_ = metricsSrv.Close()
		}
		_ = mcpLn.Close()
		_ = d.activity.Close()
		return err
	}
	// Streams (GET listeners, follows, sign-ins, drills) end when shutdown
	// starts; calls are drained, never cancelled by the signal itself.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	srvs := d.newServers(cfg.Limits, mcpLn, sockLn,
		endOnShutdown(d.tel.Handler(d.down.Handler(d.token, "")), streams), endOnShutdown(d.routes(), streams))
	mcpSrv, apiSrv := srvs.mcp, srvs.api
	apiSrv.ConnContext = d.connContext

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); d.syncLoop(runCtx) }()
	go func() { defer bg.Done(); d.replicaLoop(runCtx) }()
	go func() { defer bg.Done(); d.auth.coord.Run(runCtx, proactiveInterval) }()
	d.metrics.reg.MustRegister(newServerCollector(d))
	d.mgr.Apply(cfg.Servers)
	watchDone := d.watchConfig(runCtx)

	errc := make(chan error, 2)
	go func() { errc <- serveErr(mcpSrv.Serve(srvs.mcpLn)) }()
	go func() { errc <- serveErr(apiSrv.Serve(srvs.apiLn)) }()
	d.log.Info("proxyd started", "version", opts.Version, "socket", opts.Socket, "mcp", "http://"+d.listen+"/mcp",
		"config", opts.ConfigPath, "state_dir", opts.StateDir, "state", d.db.Engine()+":"+d.db.Path(),
		"replica", opts.Replica, "metrics", d.metricsAddr, "servers", len(cfg.Servers))
	if tr, mt := d.tel.Describe(); tr != "off" || mt != "prometheus" {
		d.log.Info("telemetry", "traces", tr, "metrics", mt)
	}
	if opts.Ready != nil {
		close(opts.Ready)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case <-d.shutdown:
	case runErr = <-errc:
	}
	d.requestShutdown()
	d.socketCalls.close()
	d.log.Info("proxyd stopping: draining in-flight calls")
	endStreams()
	d.down.EndStreams()
	// A call waiting for its client's retry holds the handler of the
	// client's first request; no retry is taken any more.
	d.relay.Close()
	// Each phase has its own budget, so a slow one does not leave the
	// next without time.
	phase := func(name string, f func(context.Context) error) {
		pctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
		defer cancel()
		if err := f(pctx); err != nil {
			d.log.Warn("shutdown: "+name, "err", err)
		}
	}
	// Stop taking MCP calls and wait for running ones, on both endpoints;
	// the control socket stays up (status answers) until the end.
	phase("draining MCP calls", func(c context.Context) error {
		return errors.Join(mcpSrv.Shutdown(c), d.socketCalls.drain(c))
	})
	// An answered call's bookkeeping may still run (a streamed answer's
	// runs after its handler); its record goes in before the log closes.
	phase("recording answered calls", func(c context.Context) error { d.answered.wait(c); return nil })
	phase("closing upstreams", func(c context.Context) error { d.mgr.Close(c); return nil })
	phase("finishing token refreshes", d.auth.coord.Close)
	phase("flushing telemetry", d.tel.Shutdown)
	cancelRun()
	bg.Wait()
	<-watchDone
	if err := d.activity.Close(); err != nil {
		d.log.Error("flushing activity", "err", err)
	}
	if metricsSrv != nil {
		phase("closing the metrics listener", metricsSrv.Shutdown)
	}
	// The replica id is free before the socket goes: 'mcpx down' returns
	// when the socket stops answering, and an 'mcpx up' right after it
	// must not find the id still held by this (still exiting) process.
	phase("leaving the replicas", d.replicas.Leave)
	phase("draining socket calls", apiSrv.Shutdown)
	d.log.Info("proxyd stopped")
	return runErr
}

// endOnShutdown cancels long-lived requests (GET streams, sign-ins,
// drills, follows) when shutdown starts; other requests, the calls, keep
// their context and are drained.
func endOnShutdown(next http.Handler, streams context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		long := r.Method == http.MethodGet || r.URL.Path == "/v1/login" || strings.HasPrefix(r.URL.Path, "/v1/drill/")
		if !long {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(streams, cancel)
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func serveErr(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// requestShutdown asks Run to stop (from the control API).
func (d *Daemon) requestShutdown() {
	d.shutOnce.Do(func() { close(d.shutdown) })
}

// stopping reports whether a shutdown has begun.
func (d *Daemon) stopping() bool {
	select {
	case <-d.shutdown:
		return true
	default:
		return false
	}
}

// requestSync coalesces list changes into one downstream Sync.
func (d *Daemon) requestSync() {
	tick(d.syncTick)
	tick(d.beatTick)
}

// tick wakes a loop without blocking: a pending tick covers this one.
func tick(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// syncLoop publishes the upstreams' lists on the endpoint, and records
// the state generations each publish covers (see listings).
func (d *Daemon) syncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.syncTick:
			if d.opts.beforeSync != nil {
				d.opts.beforeSync()
			}
			gens := generations(d.mgr.List())
			d.down.Sync()
			d.listings.publish(gens)
		}
	}
}

func (d *Daemon) config() *config.Config {
	d.cfgMu.RLock()
	defer d.cfgMu.RUnlock()
	return d.cfg
}

// reload re-reads the config file. A bad file leaves the running
// configuration in place and is reported.
func (d *Daemon) reload() (*api.ReloadResponse, error) {
	return d.apply(config.Load(d.opts.ConfigPath))
}

// apply installs a freshly loaded configuration, or records why it could
// not be loaded.
func (d *Daemon) apply(cfg *config.Config, err error) (*api.ReloadResponse, error) {
	d.cfgMu.Lock()
	d.cfgErr = err
	if err == nil {
		d.cfg = cfg
		d.secrets.use(cfg)
	}
	d.cfgMu.Unlock()
	if err != nil {
		d.log.Error("config reload failed; keeping the running configuration", "err", err)
		return nil, err
	}
	d.logWarnings(cfg)
	d.syncGrants(cfg.Servers)
	added, removed, changed := d.mgr.Apply(cfg.Servers)
	d.requestSync() // the order alone decides who keeps a shared name
	for _, n := range removed {
		d.health.Drop(n)
	}
	d.log.Info("config reloaded", "added", added, "removed", removed, "changed", changed)
	return &api.ReloadResponse{Added: nonNil(added), Removed: nonNil(removed), Changed: nonNil(changed)}, nil
}

func (d *Daemon) logWarnings(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		d.log.Warn("config warning", "detail", w.Error())
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// loadOrCreateToken reads the downstream bearer, creating it (0600) at
// first start.
func loadOrCreateToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(b)); len(t) >= 32 {
			_ = os.Chmod(path, 0o600)
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading the MCP bearer token %s: %w", path, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := "mcpx_" + hex.EncodeToString(raw)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the MCP bearer token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("writing the MCP bearer token: %w", err)
	}
	return tok, nil
}

// logWriter turns a stdio child's stderr into log lines.
type logWriter struct {
	log    *slog.Logger
	server string
}

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			w.log.Debug("upstream stderr", "server", w.server, "line", redact.Text(line))
		}
	}
	return len(p), nil
}

// replayHealthFor bounds the replay of the health window at start: one
// grouped query, but a start must not wait long on a busy database.
const replayHealthFor = 3 * time.Second

// replayHealth fills the health window from this replica's records of
// its last minutes, so a restart does not forget the calls just made
// (and a failing server stays degraded). A replay cut short by its bound
// leaves the window partly counted, and says so.
func (d *Daemon) replayHealth(ctx context.Context, replica string) {
	ctx, cancel := context.WithTimeout(ctx, replayHealthFor)
	defer cancel()
	if err := replayHealth(ctx, d.activity, d.health, replica); err != nil {
		d.log.Warn("the health window was not replayed in full from the activity log", "err", err)
	}
}
