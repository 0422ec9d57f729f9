package api

// ProbeRequest is POST /v1/probe: probe Target, or Server, a configured
// server whose settings (URL, headers, TLS CA file, transport, protocol,
// OAuth settings and stored sign-in token) the daemon takes from its own
// configuration. The other fields are explicit settings; they win over the
// server's. The reply is the probe's report.
type ProbeRequest struct {
	Target    string            `json:"target,omitempty"`
	Server    string            `json:"server,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	CAFile    string            `json:"ca_file,omitempty"`
	Transport string            `json:"transport,omitempty"`
	Protocol  string            `json:"protocol,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	OverallMS int64             `json:"overall_ms,omitempty"`
}

// ProbeReport is the outcome of a probe: the reply of POST /v1/probe and
// what `mcpx probe -o json` prints.
type ProbeReport struct {
	Target string      `json:"target"`
	Mode   ProbeMode   `json:"mode"`
	Steps  []ProbeStep `json:"steps"`
	Result ProbeResult `json:"result"`
}

// ProbeStep is one check of the probe.
type ProbeStep struct {
	ID         string     `json:"id"` // dns tcp tls http mcp auth
	Status     StepStatus `json:"status"`
	DurationMS float64    `json:"duration_ms"`
	// StartMS is when the step began, from the start of the probe: the
	// steps' common time axis (absent for skipped steps).
	StartMS float64 `json:"start_ms,omitempty"`
	Detail  string  `json:"detail"`
	Data    any     `json:"data,omitempty"`
}

// ProbeResult is the verdict of a probe.
type ProbeResult struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	Hint       string `json:"hint"`
	Reason     string `json:"reason,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
}

// ProbeMode says where a probe ran: "proxyd" or "in-process".
type ProbeMode string

// StepStatus is how a probe step ended: "ok", "warn", "fail" or "skip".
type StepStatus string
