package api

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// ActivityRecord is one tool call through proxyd: the items of GET
// /v1/activity and the lines of the follow and export streams.
type ActivityRecord struct {
	ID                 int64     `json:"id"`
	Time               time.Time `json:"time"`
	Server             string    `json:"server"`
	Tool               string    `json:"tool"`
	DurationMS         float64   `json:"duration_ms"`
	Status             string    `json:"status"`          // StatusOK | StatusError
	Error              string    `json:"error,omitempty"` // redacted
	ErrorClass         string    `json:"error_class,omitempty"`
	FaultDomain        string    `json:"fault_domain,omitempty"`
	UpstreamHTTPStatus int       `json:"upstream_http_status,omitempty"`
	Reason             string    `json:"reason,omitempty"` // why the call got its class
	RequestID          string    `json:"request_id,omitempty"`
	Client             string    `json:"client,omitempty"` // downstream session or process
	ProtocolEra        string    `json:"protocol_era,omitempty"`
	Reinit             bool      `json:"reinit,omitempty"`
	Retried            bool      `json:"retried,omitempty"`
	TokenRefresh       bool      `json:"token_refresh,omitempty"`
	// Progress counts the progress notifications relayed to the client;
	// Inputs lists the upstream's requests for input (elicitation,
	// sampling, roots) with the answers' actions, as "method=action, ..."
	// (action: accept, decline, cancel, error, refused, or asked when a
	// modern client answers in its retry).
	Progress int    `json:"progress,omitempty"`
	Inputs   string `json:"inputs,omitempty"`
	// Replica is the proxyd that made the call, when several share the
	// state database.
	Replica string `json:"replica,omitempty"`
	// Method is the request's MCP method when it is not tools/call (the
	// command line's resources/read, prompts/get, rpc requests; Tool then
	// reads "METHOD NAME"); such records are not counted in health.
	Method string `json:"method,omitempty"`
}

// Call statuses of an ActivityRecord.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// CallStatuses is the vocabulary of ActivityRecord.Status.
var CallStatuses = []string{StatusOK, StatusError}

// ActivitySummaryRow is one group of GET /v1/activity/summary.
type ActivitySummaryRow struct {
	Key         string  `json:"key"`
	Calls       int     `json:"calls"`
	Failed      int     `json:"failed"`
	FailureRate float64 `json:"failure_rate"`
}

// SummaryGroups are the groupings of the activity summary.
var SummaryGroups = []string{"server", "tool", "error_class", "fault_domain", "replica"}

// ActivityQuery selects activity records; it travels as the query
// parameters of the activity endpoints. Empty lists and zero times match
// everything; values within one list are alternatives.
type ActivityQuery struct {
	Servers      []string
	Tools        []string
	Statuses     []string
	ErrorClasses []string
	FaultDomains []string
	Replicas     []string  // the proxyd replicas that made the calls
	Since, Until time.Time // inclusive
	Limit        int       // list only; 0: the daemon's default
	// After keeps the records with a larger id only: a follow resumed
	// after a restart reads what it missed from the export.
	After int64
}

// activity query parameters, in one place for the client and the daemon.
const (
	paramServer      = "server"
	paramTool        = "tool"
	paramStatus      = "status"
	paramErrorClass  = "error_class"
	paramFaultDomain = "fault_domain"
	paramReplica     = "replica"
	paramSince       = "since"
	paramUntil       = "until"
	paramLimit       = "limit"
	paramAfter       = "after"
	paramBy          = "by"
)

// Values encodes q as query parameters.
func (q ActivityQuery) Values() url.Values {
	v := url.Values{}
	for _, l := range []struct {
		param string
		vals  []string
	}{
		{paramServer, q.Servers}, {paramTool, q.Tools}, {paramStatus, q.Statuses},
		{paramErrorClass, q.ErrorClasses}, {paramFaultDomain, q.FaultDomains}, {paramReplica, q.Replicas},
	} {
		for _, x := range l.vals {
			v.Add(l.param, x)
		}
	}
	if !q.Since.IsZero() {
		v.Set(paramSince, q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set(paramUntil, q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set(paramLimit, strconv.Itoa(q.Limit))
	}
	if q.After > 0 {
		v.Set(paramAfter, strconv.FormatInt(q.After, 10))
	}
	return v
}

// ParseActivityQuery reads the query parameters of an activity endpoint:
// lists repeated or comma-separated (SplitList), RFC 3339 times and a
// non-negative limit.
func ParseActivityQuery(v url.Values) (ActivityQuery, error) {
	q := ActivityQuery{
		Servers:      SplitList(v[paramServer]),
		Tools:        SplitList(v[paramTool]),
		Statuses:     SplitList(v[paramStatus]),
		ErrorClasses: SplitList(v[paramErrorClass]),
		FaultDomains: SplitList(v[paramFaultDomain]),
		Replicas:     SplitList(v[paramReplica]),
	}
	var err error
	if s := v.Get(paramSince); s != "" {
		if q.Since, err = parseQueryTime(s); err != nil {
			return q, fmt.Errorf("since: %w", err)
		}
	}
	if s := v.Get(paramUntil); s != "" {
		if q.Until, err = parseQueryTime(s); err != nil {
			return q, fmt.Errorf("until: %w", err)
		}
	}
	if s := v.Get(paramLimit); s != "" {
		if q.Limit, err = strconv.Atoi(s); err != nil || q.Limit < 0 {
			return q, fmt.Errorf("limit must be a non-negative number")
		}
	}
	if s := v.Get(paramAfter); s != "" {
		if q.After, err = strconv.ParseInt(s, 10, 64); err != nil || q.After < 0 {
			return q, fmt.Errorf("after must be a record id (a non-negative number)")
		}
	}
	return q, nil
}

// parseQueryTime reads an RFC 3339 time of years 1 to 9999 in UTC (what
// the format can say, and so what the query encodes back).
func parseQueryTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, err
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, fmt.Errorf("%s is outside the years 1 to 9999", s)
	}
	return t, nil
}

// SummaryGroup is the grouping of a summary request ("by"), default server.
func SummaryGroup(v url.Values) string {
	if by := v.Get(paramBy); by != "" {
		return by
	}
	return "server"
}
