// Package probe diagnoses a connection to a remote MCP server step by step
// (DNS, TCP, TLS, HTTP, MCP, OAuth discovery) and names the cause of a
// failure in the terms of the layer that failed.
package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpx-dev/mcpx/internal/discovery"
	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// Step ids, in report order.
const (
	StepDNS  = "dns"
	StepTCP  = "tcp"
	StepTLS  = "tls"
	StepHTTP = "http"
	StepMCP  = "mcp"
	StepAuth = "auth"
)

// Step statuses.
const (
	StatusOK   api.StepStatus = "ok"
	StatusWarn api.StepStatus = "warn"
	StatusFail api.StepStatus = "fail"
	StatusSkip api.StepStatus = "skip"
)

// Report modes.
const (
	ModeProxyd    api.ProbeMode = "proxyd"
	ModeInProcess api.ProbeMode = "in-process"
)

// Transports and protocol choices.
const (
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
	ProtocolAuto            = "auto"
	ProtocolLegacy          = "legacy"
	ProtocolModern          = "modern"
)

// Defaults used when Options leave a field zero.
const (
	DefaultTimeout = 10 * time.Second
	// certExpiryWarn is how close to expiry a certificate turns the tls
	// step into a warning.
	certExpiryWarn = 14 * 24 * time.Hour
)

// Options configure one probe.
type Options struct {
	Target      string            // URL of the MCP endpoint
	Headers     map[string]string // extra request headers; values are secrets
	CAFile      string            // PEM bundle trusted in addition to the system store
	Transport   string            // streamable-http (default) | sse
	Protocol    string            // auto (default) | legacy | modern
	Timeout     time.Duration     // per step (default 10s)
	Overall     time.Duration     // whole probe (default 3x Timeout)
	OAuth       discovery.Overrides
	BearerToken string // stored access token; never printed
	// ServerName is the configured name of the target, if any; hints use
	// it to name the next command.
	ServerName string
	// CAOnlyHere: CAFile came with this probe (--ca-file), not from the
	// configured server's tls.ca_file, so proxyd does not trust it for
	// the server; a healthy verdict says so.
	CAOnlyHere bool
	// OAuthClientID is a configured OAuth client id: with it, an
	// authorization server without dynamic registration is still usable.
	OAuthClientID string
	// AllowMissingPKCE mirrors the per-server allow_missing_pkce_methods
	// switch: an authorization server that omits
	// code_challenge_methods_supported is then a warning, not a failure.
	AllowMissingPKCE bool
}

// Report is the outcome of a probe; its wire shape is api.ProbeReport.
type (
	Report = api.ProbeReport
	Step   = api.ProbeStep
	Result = api.ProbeResult
)

// runner holds the state of one probe.
type runner struct {
	opts   Options
	target *url.URL
	red    *redactor
	steps  []Step
	result *Result

	host, port string
	addrs      []net.IP
	conn       net.Conn // connection of the tcp/tls steps, handed to HTTP
	tlsConfig  *tls.Config
	pool       chan poolResult
	// clientCertRequested: the server asked for a client certificate
	// during the handshake; a connection it then drops is explained by it.
	clientCertRequested bool

	client *http.Client
	rec    *recorder
	// t0 is the start of the probe, the origin of every StartMS.
	t0 time.Time
}

// Run probes opts.Target. It never returns nil and never fails: every
// problem is reported in the Report. Mode is "in-process"; the daemon
// sets "proxyd" on reports it serves.
func Run(ctx context.Context, opts Options) *Report {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Overall <= 0 {
		opts.Overall = 3 * opts.Timeout
	}
	if opts.Transport == "" {
		opts.Transport = TransportStreamableHTTP
	}
	if opts.Protocol == "" {
		opts.Protocol = ProtocolAuto
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Overall)
	defer cancel()

	r := &runner{opts: opts, t0: time.Now()}
	u, err := parseTarget(opts.Target)
	r.target = u
	r.red = newRedactor(opts, u)
	if err != nil {
		r.setResult(Result{Code: CodeInvalidTarget, Message: err.Error(),
			Hint: "give an absolute http:// or https:// URL, or the name of a configured server"})
	} else {
		r.run(ctx)
	}
	return r.report()
}

// parseTarget accepts absolute http(s) URLs only.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Error quotes the input, which may hold a secret
		return nil, fmt.Errorf("the target is not a valid URL")
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, fmt.Errorf("the target must be an http:// or https:// URL")
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("the target URL has no host")
	}
	return u, nil
}

func (r *runner) run(ctx context.Context) {
	defer func() {
		if r.conn != nil {
			r.conn.Close()
		}
		if r.client != nil {
			r.client.CloseIdleConnections()
		}
	}()
	r.host = r.target.Hostname()
	r.port = r.target.Port()
	if r.port == "" {
		r.port = map[string]string{"http": "80", "https": "443"}[r.target.Scheme]
	}
	if r.target.Scheme == "https" {
		r.loadPool()
	}
	if !r.dnsStep(ctx) {
		return
	}
	if !r.tcpStep(ctx) {
		return
	}
	if !r.tlsStep(ctx) {
		return
	}
	r.httpAndMCPSteps(ctx)
}

// add appends a step, timing it from start.
func (r *runner) add(id string, status api.StepStatus, start time.Time, detail string, data any) {
	s := Step{ID: id, Status: status, Detail: detail, Data: data}
	if !start.IsZero() {
		s.DurationMS = ms(time.Since(start))
		s.StartMS = r.offset(start)
	}
	r.steps = append(r.steps, s)
}

// offset is t on the probe's time axis, in milliseconds.
func (r *runner) offset(t time.Time) float64 { return max(0, ms(t.Sub(r.t0))) }

// place moves step id's start to t, keeping its duration (a step timed
// from data gathered before it was judged).
func (r *runner) place(id string, t time.Time) {
	for i := range r.steps {
		if r.steps[i].ID == id && r.steps[i].Status != StatusSkip {
			r.steps[i].StartMS = r.offset(t)
		}
	}
}

// setResult records the verdict; the first hard failure wins.
func (r *runner) setResult(res Result) {
	if r.result == nil {
		r.result = &res
	}
}

// fail records a failed step and the verdict it implies.
func (r *runner) fail(id string, start time.Time, res Result, data any) {
	r.add(id, StatusFail, start, res.Message, data)
	r.setResult(res)
}

var stepOrder = []string{StepDNS, StepTCP, StepTLS, StepHTTP, StepMCP, StepAuth}

// report fills skipped steps, orders them and redacts everything.
func (r *runner) report() *Report {
	rep := &Report{Mode: ModeInProcess}
	rep.Target = redact.URL(r.opts.Target)
	byID := map[string]Step{}
	for _, s := range r.steps {
		byID[s.ID] = s
	}
	skipReason := "not reached"
	if r.result != nil && r.result.Code != CodeOK && r.result.Code != CodeAuthRequired {
		skipReason = "skipped after " + r.result.Code
	}
	for _, id := range stepOrder {
		s, ok := byID[id]
		if !ok {
			s = Step{ID: id, Status: StatusSkip, Detail: skipReason}
		}
		s.Detail = r.red.String(s.Detail)
		s.Data = r.red.value(s.Data)
		rep.Steps = append(rep.Steps, s)
	}
	res := Result{Code: CodeOK, Message: "MCP endpoint answered", Hint: hintOK}
	if r.result != nil {
		res = *r.result
	}
	if res.Hint == "" {
		res.Hint = "see the failed step above for details"
	}
	res.Message = r.red.String(res.Message)
	res.Hint = r.red.String(res.Hint)
	res.Reason = clean(res.Reason)
	rep.Result = res
	return rep
}

// hostPort is the endpoint named in hints.
func (r *runner) hostPort() string { return net.JoinHostPort(r.host, r.port) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
