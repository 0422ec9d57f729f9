package proxyd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// routes is the control API: every endpoint, its method and its handler,
// in one table. The handlers live in files named by group: status_api.go,
// call_api.go, probe_api.go, auth_api.go, activity_api.go, drill_api.go.
func (d *Daemon) routes() http.Handler {
	metrics := d.metricsHandler()
	table := []struct {
		pattern string
		h       handler
	}{
		{"GET /v1/status", d.handleStatus},
		{"GET /v1/health", d.handleHealth},
		{"GET /v1/tools", d.handleTools},
		{"GET /v1/connect-info", d.handleConnectInfo},
		{"POST /v1/reload", d.handleReload},
		{"POST /v1/shutdown", d.handleShutdown},
		{"GET /v1/metrics", func(w http.ResponseWriter, r *http.Request) error { metrics.ServeHTTP(w, r); return nil }},

		{"POST /v1/call", d.handleCall},
		{"POST /v1/call/input", d.handleCallInput},
		{"POST /v1/call/cancel", d.handleCallCancel},
		{"POST /v1/probe", d.handleProbe},
		{"GET /v1/resources", d.handleResources},
		{"GET /v1/prompts", d.handlePrompts},
		{"POST /v1/rpc", d.handleRPC},

		{"POST /v1/login", d.handleLogin},
		{"POST /v1/logout", d.handleLogout},
		{"GET /v1/auth/status", d.handleAuthStatus},
		{"POST /v1/auth/token", d.handleSetToken},

		{"GET /v1/activity", d.handleActivityList},
		{"GET /v1/activity/follow", d.handleActivityFollow},
		{"GET /v1/activity/export", d.handleActivityExport},
		{"GET /v1/activity/summary", d.handleActivitySummary},
		{"GET /v1/activity/{id}", d.handleActivityGet},

		{"POST /v1/drill/session", d.handleDrillSession},
		{"POST /v1/drill/refresh", d.handleDrillRefresh},

		{"/", func(w http.ResponseWriter, r *http.Request) error {
			return &apiError{http.StatusNotFound, api.CodeNoRoute, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path)}
		}},
	}
	mux := http.NewServeMux()
	for _, rt := range table {
		mux.Handle(rt.pattern, d.serve(rt.h))
	}
	// The stdio bridge speaks MCP over the socket: the socket's peer check
	// is its credential, so no bearer here.
	mux.Handle("/v1/mcp", d.guardSocket(d.socketCalls.wrap(http.StripPrefix("/v1", d.down.Handler("", "stdio")))))
	return mux
}

// serve runs a handler behind the socket guard; its error becomes the one
// error shape.
func (d *Daemon) serve(h handler) http.Handler {
	return d.guardSocket(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	}))
}

type peerKey struct{}

// connContext notes each socket connection's peer uid.
func (d *Daemon) connContext(ctx context.Context, c net.Conn) context.Context {
	uid, err := peerUID(c)
	if err != nil {
		uid = -1
	}
	return context.WithValue(ctx, peerKey{}, uid)
}

func (d *Daemon) allowedUID() int {
	if d.opts.AllowedUID != nil {
		return *d.opts.AllowedUID
	}
	return os.Getuid()
}

// guardSocket refuses other users' processes and anything a browser sent.
func (d *Daemon) guardSocket(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, d.opts.Version)
		if uid, _ := r.Context().Value(peerKey{}).(int); uid != d.allowedUID() {
			writeError(w, &apiError{http.StatusForbidden, api.CodeForbidden, "proxyd serves only the user that started it"})
			return
		}
		if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
			writeError(w, &apiError{http.StatusForbidden, api.CodeForbidden, "requests from browsers are refused"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
