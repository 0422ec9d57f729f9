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

// DrillEventType is the type of a line of a drill's stream.
type DrillEventType string

// Drill event types.
const (
	DrillEventProgress DrillEventType = "progress"
	DrillEventReport   DrillEventType = "report"
	DrillEventError    DrillEventType = "error"
)

// DrillEvent is one NDJSON line of a drill's stream, the same for every
// drill: "progress" lines, then one "report" (R, the drill's report) or
// one "error".
type DrillEvent[R any] struct {
	Type    DrillEventType `json:"type"`
	Time    time.Time      `json:"time"`
	Message string         `json:"message,omitempty"`
	Report  *R             `json:"report,omitempty"`
	Error   *ErrorDetail   `json:"error,omitempty"`
}

// Verdict is how a drill ended.
type Verdict string

// Drill verdicts.
const (
	VerdictPass          Verdict = "PASS"
	VerdictFail          Verdict = "FAIL"
	VerdictNotApplicable Verdict = "N/A"
)

// DrillOutcome is what every drill report starts with.
type DrillOutcome struct {
	Server  string   `json:"server"`
	Verdict Verdict  `json:"verdict"`
	Notes   []string `json:"notes,omitempty"`
}

// Outcome gives a report's DrillOutcome to code that handles every drill.
func (o *DrillOutcome) Outcome() *DrillOutcome { return o }

// The drills' streams.
type (
	SessionDrillEvent = DrillEvent[SessionDrillReport]
	RefreshDrillEvent = DrillEvent[RefreshDrillReport]
)

// SessionDrillReport is the outcome of `mcpx drill session`.
type SessionDrillReport struct {
	DrillOutcome
	Applicable bool `json:"applicable"`
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
	Failures []DrillFailure `json:"failures,omitempty"`
}

// DrillFailure is one failed call of a drill (the first few are kept).
type DrillFailure struct {
	Tool       string `json:"tool"`
	ErrorClass string `json:"error_class,omitempty"`
	Message    string `json:"message"`
}

// RefreshDrillRequest is POST /v1/drill/refresh.
type RefreshDrillRequest struct {
	Server  string `json:"server"`
	Callers int    `json:"callers"`
	// At, when set, is when the callers fire (up to 10 s ahead), so that
	// the replicas sharing a state database fire together.
	At time.Time `json:"at,omitzero"`
	// Join: another replica runs this drill and expires the token; this
	// one only fires its callers at At, on the token it reads from the
	// store, and leaves the follow-up check to that replica.
	Join bool `json:"join,omitempty"`
}

// RefreshDrillReport is the outcome of `mcpx drill refresh`.
type RefreshDrillReport struct {
	DrillOutcome
	// Replica is the proxyd that ran this part of the drill.
	Replica       string  `json:"replica,omitempty"`
	Callers       int     `json:"callers"`
	TokenRequests int64   `json:"token_requests"`
	Succeeded     int     `json:"succeeded"`
	Failed        int     `json:"failed"`
	GrantIntact   bool    `json:"grant_intact"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	// Replicas are the parts of a drill run on several replicas at once
	// (mcpx drill refresh --replicas); the fields above are their sums.
	Replicas []RefreshDrillReport `json:"replicas,omitempty"`
}
