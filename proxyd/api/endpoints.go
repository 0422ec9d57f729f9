package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Endpoints: one method per route of the control API, in the order of
// proxyd's route table.

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Health is GET /v1/health: every server's state and call health, or one
// server's ("" for all), as every live replica sharing the state sees it
// (only those named in replicas, when given).
func (c *Client) Health(ctx context.Context, server string, replicas ...string) ([]ServerStatus, error) {
	var out []ServerStatus
	p := withServer("/v1/health", server)
	if len(replicas) > 0 {
		v := url.Values{paramReplica: replicas}
		sep := "?"
		if strings.Contains(p, "?") {
			sep = "&"
		}
		p += sep + v.Encode()
	}
	return out, c.do(ctx, http.MethodGet, p, nil, &out)
}

// Tools is GET /v1/tools: every server's tools, or one server's ("" for
// all).
func (c *Client) Tools(ctx context.Context, server string) ([]Tool, error) {
	var ts []Tool
	return ts, c.do(ctx, http.MethodGet, withServer("/v1/tools", server), nil, &ts)
}

// ConnectInfo is GET /v1/connect-info.
func (c *Client) ConnectInfo(ctx context.Context) (*ConnectInfo, error) {
	var r ConnectInfo
	return &r, c.do(ctx, http.MethodGet, "/v1/connect-info", nil, &r)
}

// Reload is POST /v1/reload.
func (c *Client) Reload(ctx context.Context) (*ReloadResponse, error) {
	var r ReloadResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/reload", nil, &r)
}

// Shutdown is POST /v1/shutdown.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/shutdown", nil, nil)
}

// Metrics is GET /v1/metrics: the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.send(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStreamLine))
	return string(b), err
}

// Call is POST /v1/call.
func (c *Client) Call(ctx context.Context, req CallRequest) (*CallResponse, error) {
	var r CallResponse
	return &r, c.do(ctx, http.MethodPost, "/v1/call", req, &r)
}

// Probe is POST /v1/probe.
func (c *Client) Probe(ctx context.Context, req ProbeRequest) (*ProbeReport, error) {
	var r ProbeReport
	return &r, c.do(ctx, http.MethodPost, "/v1/probe", req, &r)
}

// Login is POST /v1/login: the sign-in's events as they happen.
func (c *Client) Login(ctx context.Context, req LoginRequest) (*Stream[LoginEvent], error) {
	return openStream[LoginEvent](ctx, c, http.MethodPost, "/v1/login", req)
}

// Logout is POST /v1/logout.
func (c *Client) Logout(ctx context.Context, server string) (*LogoutResult, error) {
	var r LogoutResult
	return &r, c.do(ctx, http.MethodPost, "/v1/logout", LogoutRequest{Server: server}, &r)
}

// AuthStatus is GET /v1/auth/status: every HTTP server's sign-in, or one
// server's ("" for all).
func (c *Client) AuthStatus(ctx context.Context, server string) ([]AuthStatus, error) {
	var out []AuthStatus
	return out, c.do(ctx, http.MethodGet, withServer("/v1/auth/status", server), nil, &out)
}

// Activity is GET /v1/activity: the newest records matching q.
func (c *Client) Activity(ctx context.Context, q ActivityQuery) ([]ActivityRecord, error) {
	var out []ActivityRecord
	return out, c.do(ctx, http.MethodGet, withQuery("/v1/activity", q.Values()), nil, &out)
}

// ActivityRecord is GET /v1/activity/{id}.
func (c *Client) ActivityRecord(ctx context.Context, id int64) (*ActivityRecord, error) {
	var r ActivityRecord
	return &r, c.do(ctx, http.MethodGet, "/v1/activity/"+strconv.FormatInt(id, 10), nil, &r)
}

// FollowActivity is GET /v1/activity/follow: records matching q as calls
// complete, until ctx ends.
func (c *Client) FollowActivity(ctx context.Context, q ActivityQuery) (*Stream[ActivityRecord], error) {
	return openStream[ActivityRecord](ctx, c, http.MethodGet, withQuery("/v1/activity/follow", q.Values()), nil)
}

// ExportActivity is GET /v1/activity/export: every record matching q,
// oldest first.
func (c *Client) ExportActivity(ctx context.Context, q ActivityQuery) (*Stream[ActivityRecord], error) {
	return openStream[ActivityRecord](ctx, c, http.MethodGet, withQuery("/v1/activity/export", q.Values()), nil)
}

// ActivitySummary is GET /v1/activity/summary: calls and failures of the
// records matching q, grouped by one of SummaryGroups.
func (c *Client) ActivitySummary(ctx context.Context, q ActivityQuery, by string) ([]ActivitySummaryRow, error) {
	v := q.Values()
	v.Set(paramBy, by)
	var out []ActivitySummaryRow
	return out, c.do(ctx, http.MethodGet, withQuery("/v1/activity/summary", v), nil, &out)
}

// SessionDrill is POST /v1/drill/session: the drill's events.
func (c *Client) SessionDrill(ctx context.Context, req SessionDrillRequest) (*Stream[SessionDrillEvent], error) {
	return openStream[SessionDrillEvent](ctx, c, http.MethodPost, "/v1/drill/session", req)
}

// RefreshDrill is POST /v1/drill/refresh: the drill's events.
func (c *Client) RefreshDrill(ctx context.Context, req RefreshDrillRequest) (*Stream[RefreshDrillEvent], error) {
	return openStream[RefreshDrillEvent](ctx, c, http.MethodPost, "/v1/drill/refresh", req)
}

// MCPEndpoint is the MCP endpoint proxyd serves on its socket (for the
// stdio bridge): Streamable HTTP, with the socket's peer check as its
// credential.
const MCPEndpoint = "http://" + Host + "/v1/mcp"

func withServer(path, server string) string {
	if server == "" {
		return path
	}
	return withQuery(path, url.Values{paramServer: {server}})
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}
