// Package drill holds proxyd's drills: controlled failures fired at a real
// upstream to show how mcpx (and the server) behave.
package drill

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// Bounds of the session drill.
const (
	MaxCalls     = 1000
	maxReadTools = 2
	maxFailures  = 5
	progressStep = 10 // progress lines per drill, about
)

// SessionTarget is the upstream connection a session drill runs against.
type SessionTarget interface {
	Name() string
	Sessionful() (bool, string)
	EndSession(ctx context.Context) (string, error)
	Ping(ctx context.Context) error
	Tools() []upstream.Tool
	Status() api.ServerStatus
}

// Outcome is what one call came to.
type Outcome struct {
	Err        error
	ErrorClass string
	// IsError: the tool answered with isError (it ran on the session).
	IsError bool
}

// Caller makes one tools/call through proxyd's call path. The context
// carries an upstream.CallInfo that the call path fills in.
type Caller func(ctx context.Context, tool string, args json.RawMessage) Outcome

// SessionOptions configure a session drill.
type SessionOptions struct {
	Calls         int
	IncludeWrites bool
	// Progress receives human-readable progress lines (any goroutine).
	Progress func(string)
}

// pick is a tool the drill calls, with arguments it accepts.
type pick struct {
	name string
	args json.RawMessage
	read bool
}

// Session ends the target's upstream session, fires the calls concurrently
// and reports what proxyd did: re-inits (expected 1), calls retried, calls
// not repeated, failures and a verdict.
func Session(ctx context.Context, t SessionTarget, call Caller, o SessionOptions) (api.SessionDrillReport, error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	rep := api.SessionDrillReport{DrillOutcome: api.DrillOutcome{Server: t.Name()}}
	if o.Calls < 1 || o.Calls > MaxCalls {
		return rep, fmt.Errorf("calls must be between 1 and %d", MaxCalls)
	}
	if ok, why := t.Sessionful(); !ok {
		rep.Verdict = api.VerdictNotApplicable
		rep.Notes = append(rep.Notes, "the session drill does not apply: "+why)
		return rep, nil
	}
	rep.Applicable = true
	reads, writes := pickTools(t.Tools())
	if len(reads) == 0 {
		return rep, errors.New("the server has no read-only tool the drill can call without knowing its arguments")
	}
	plan := planCalls(o.Calls, reads, writes, o.IncludeWrites)
	for _, p := range plan {
		if p.read {
			rep.Reads++
		} else {
			rep.Writes++
		}
	}
	rep.Calls = len(plan)
	rep.Tools = toolNames(plan)
	if o.IncludeWrites && len(writes) == 0 {
		rep.Notes = append(rep.Notes, "no write tool the drill can call: reads only")
	}
	// Start from a working session (a ping re-establishes one already lost).
	if err := t.Ping(ctx); err != nil {
		return rep, fmt.Errorf("the server does not answer a ping before the drill: %w", err)
	}
	st := t.Status()
	before := st.Reinits
	progress(fmt.Sprintf("%s: %s era, protocol %s, session %s; calling %s", t.Name(), st.Era, st.ProtocolVersion,
		st.SessionID, strings.Join(rep.Tools, ", ")))

	how, err := t.EndSession(ctx)
	if err != nil {
		return rep, fmt.Errorf("ending the upstream session: %w", err)
	}
	rep.EndedBy = how
	switch how {
	case upstream.EndedByDelete:
		progress("ended the session with HTTP DELETE")
	default:
		progress("the server does not accept DELETE: presenting a session id it does not know")
	}

	progress(fmt.Sprintf("firing %d concurrent calls (%d reads, %d writes)", rep.Calls, rep.Reads, rep.Writes))
	results := fire(ctx, plan, call, progress)
	for i, r := range results {
		if r.info.Retried {
			rep.Retried++
		}
		rep.Deviation = rep.Deviation || r.info.Deviation
		rep.SlowestMS = max(rep.SlowestMS, float64(r.took.Microseconds())/1000)
		switch {
		case r.out.Err == nil:
			rep.Succeeded++
		case errors.Is(r.out.Err, upstream.ErrSessionReestablished):
			rep.NotRepeated++
		default:
			rep.Failed++
			if plan[i].read {
				rep.ReadsFailed++
			}
			if len(rep.Failures) < maxFailures {
				rep.Failures = append(rep.Failures, api.DrillFailure{Tool: plan[i].name, ErrorClass: r.out.ErrorClass, Message: r.out.Err.Error()})
			}
		}
	}
	rep.Reinits = t.Status().Reinits - before

	// The new session must serve the next call.
	after := call(withInfo(ctx), reads[0].name, reads[0].args)
	rep.AfterOK = after.Err == nil
	if !rep.AfterOK {
		rep.Notes = append(rep.Notes, "a read call after the drill failed: "+after.Err.Error())
	}

	rep.Verdict = api.VerdictPass
	if rep.Reinits != 1 || rep.ReadsFailed > 0 || !rep.AfterOK {
		rep.Verdict = api.VerdictFail
	}
	switch {
	case rep.Reinits == 0:
		rep.Notes = append(rep.Notes, "no re-initialisation happened: the server did not report the session lost")
	case rep.Reinits > 1:
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d re-initialisations for one lost session, expected 1", rep.Reinits))
	}
	if rep.Deviation {
		rep.Notes = append(rep.Notes, upstream.DeviationNote)
	}
	if rep.NotRepeated > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d write calls reached the server on the lost session and were not repeated (by design)", rep.NotRepeated))
	}
	return rep, nil
}

type result struct {
	out  Outcome
	info upstream.CallInfo
	took time.Duration
}

func withInfo(ctx context.Context) context.Context {
	ctx, _ = upstream.WithCallInfo(ctx)
	return ctx
}

// fire runs every planned call at once (released together) and reports
// progress as they complete.
func fire(ctx context.Context, plan []pick, call Caller, progress func(string)) []result {
	results := make([]result, len(plan))
	start := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	step := max(1, len(plan)/progressStep)
	for i, p := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, info := upstream.WithCallInfo(ctx)
			<-start
			t0 := time.Now()
			out := call(cctx, p.name, p.args)
			results[i] = result{out: out, info: *info, took: time.Since(t0)}
			mu.Lock()
			done++
			if done%step == 0 || done == len(plan) {
				progress(fmt.Sprintf("%d/%d calls done", done, len(plan)))
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// planCalls spreads n calls over the tools: a quarter of them writes when
// asked for and available, the rest reads.
func planCalls(n int, reads, writes []pick, includeWrites bool) []pick {
	nWrites := 0
	if includeWrites && len(writes) > 0 {
		nWrites = max(1, n/4)
		if n == 1 {
			nWrites = 0
		}
	}
	// Interleave (three reads, one write) so writes do not all go last.
	out := make([]pick, 0, n)
	r, w := 0, 0
	for r+w < n {
		for k := 0; k < 3 && r < n-nWrites; k++ {
			out = append(out, reads[r%len(reads)])
			r++
		}
		if w < nWrites {
			out = append(out, writes[w%len(writes)])
			w++
		}
	}
	return out
}

func toolNames(plan []pick) []string {
	var names []string
	for _, p := range plan {
		if !slices.Contains(names, p.name) {
			names = append(names, p.name)
		}
	}
	return names
}

// pickTools chooses the read-only tools (echo-like first, then get-like,
// fewest required arguments first) and the write tools (non-destructive
// first) whose required arguments the drill can fill in.
func pickTools(tools []upstream.Tool) (reads, writes []pick) {
	type cand struct {
		pick
		rank, required int
		destructive    bool
	}
	var rc, wc []cand
	for _, t := range tools {
		args, required, ok := fillArgs(t)
		if !ok {
			continue
		}
		c := cand{pick: pick{name: t.Name, args: args, read: t.ReadOnly()}, required: required, destructive: t.Destructive()}
		name := strings.ToLower(t.Name)
		switch {
		case strings.Contains(name, "echo"):
			c.rank = 0
		case strings.HasPrefix(name, "get"):
			c.rank = 1
		default:
			c.rank = 2
		}
		if c.read {
			rc = append(rc, c)
		} else {
			wc = append(wc, c)
		}
	}
	slices.SortFunc(rc, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.required, b.required), cmp.Compare(a.name, b.name))
	})
	slices.SortFunc(wc, func(a, b cand) int {
		return cmp.Or(boolCmp(a.destructive, b.destructive), cmp.Compare(a.required, b.required), cmp.Compare(a.name, b.name))
	})
	for _, c := range rc[:min(len(rc), maxReadTools)] {
		reads = append(reads, c.pick)
	}
	if len(wc) > 0 {
		writes = append(writes, wc[0].pick)
	}
	return reads, writes
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// fillArgs builds arguments for a tool's required properties: the first
// enum value, else a plain value of the property's type. It reports false
// when a required property is of a type it cannot fill.
func fillArgs(t upstream.Tool) (json.RawMessage, int, bool) {
	var schema struct {
		Properties map[string]struct {
			Type    any   `json:"type"`
			Enum    []any `json:"enum"`
			Default any   `json:"default"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if len(t.RawInputSchema) > 0 {
		if err := json.Unmarshal(t.RawInputSchema, &schema); err != nil {
			return nil, 0, false
		}
	}
	args := map[string]any{}
	for _, name := range schema.Required {
		p, ok := schema.Properties[name]
		if !ok {
			return nil, 0, false
		}
		switch {
		case len(p.Enum) > 0:
			args[name] = p.Enum[0]
		case p.Default != nil:
			args[name] = p.Default
		default:
			typ, _ := p.Type.(string)
			switch typ {
			case "string":
				args[name] = "mcpx drill"
			case "number", "integer":
				args[name] = 1
			case "boolean":
				args[name] = false
			default:
				return nil, 0, false
			}
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, 0, false
	}
	return b, len(schema.Required), true
}
