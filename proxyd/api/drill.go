package api

import "time"

// SessionDrillRequest is POST /v1/drill/session: end the upstream session
// of Server and fire Calls concurrent calls at it.
type SessionDrillRequest struct {
	Server string `json:"server"`
	Calls  int    `json:"calls"`
	// IncludeWrites also calls a tool that is not read-only; such calls
	// must never be repeated.
	IncludeWrites bool `json:"include_writes,omitempty"`
}

// SessionDrillEvent is one NDJSON line of the session drill's stream:
// "progress" lines, then one "report" (or one "error").
type SessionDrillEvent struct {
	Type    string              `json:"type"`
	Time    time.Time           `json:"time"`
	Message string              `json:"message,omitempty"`
	Report  *SessionDrillReport `json:"report,omitempty"`
	Error   *ErrorDetail        `json:"error,omitempty"`
}

// Session drill event types.
const (
	DrillEventProgress = "progress"
	DrillEventReport   = "report"
	DrillEventError    = "error"
)

// Drill verdicts.
const (
	VerdictPass          = "PASS"
	VerdictFail          = "FAIL"
	VerdictNotApplicable = "N/A"
)

// SessionDrillReport is the outcome of `mcpx drill session`.
type SessionDrillReport struct {
	Server     string `json:"server"`
	Applicable bool   `json:"applicable"`
	// EndedBy is how the session was ended: "delete" (HTTP DELETE) or
	// "unknown_session_id" (proxyd presented an id the server does not know).
	EndedBy string `json:"ended_by,omitempty"`
	// Calls = Reads + Writes fired concurrently after the session ended.
	Calls  int `json:"calls"`
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
	// Reinits is how many times proxyd re-initialised the session (expected 1).
	Reinits int64 `json:"reinits"`
	// Retried counts calls sent a second time after the re-init.
	Retried int `json:"retried"`
	// NotRepeated counts calls refused a repeat ("session re-established;
	// call not repeated"): writes, or tools whose definition changed.
	NotRepeated int `json:"not_repeated"`
	// Failed counts calls that failed otherwise; ReadsFailed the reads among them.
	Failed      int `json:"failed"`
	ReadsFailed int `json:"reads_failed"`
	Succeeded   int `json:"succeeded"`
	// Deviation: the server answered the lost session with HTTP 400 instead of 404.
	Deviation bool `json:"deviation,omitempty"`
	// Tools are the tools called.
	Tools     []string `json:"tools,omitempty"`
	SlowestMS float64  `json:"slowest_ms"`
	// AfterOK: a read call on the new session worked after the drill.
	AfterOK  bool           `json:"after_ok"`
	Verdict  string         `json:"verdict"`
	Notes    []string       `json:"notes,omitempty"`
	Failures []DrillFailure `json:"failures,omitempty"`
}

// DrillFailure is one failed call of a drill (the first few are kept).
type DrillFailure struct {
	Tool       string `json:"tool"`
	ErrorClass string `json:"error_class,omitempty"`
	Message    string `json:"message"`
}
