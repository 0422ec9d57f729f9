package proxyd

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// filterFromQuery reads the activity filter of a request (the wire form
// is api.ActivityQuery) and checks its vocabulary.
func filterFromQuery(v url.Values) (activity.Filter, error) {
	q, err := api.ParseActivityQuery(v)
	if err != nil {
		return activity.Filter{}, badRequest("%v", err)
	}
	f := activity.Filter{
		Servers: q.Servers, Tools: q.Tools, Statuses: q.Statuses, ErrorClasses: q.ErrorClasses, FaultDomains: q.FaultDomains, Replicas: q.Replicas,
		Since: q.Since, Until: q.Until, Limit: q.Limit, AfterID: q.After,
	}
	if err := f.Validate(); err != nil {
		return f, badRequest("%v", err)
	}
	return f, nil
}

// settleActivity makes every call answered so far readable: its record
// made (see answered) and written.
func (d *Daemon) settleActivity(ctx context.Context) error {
	d.answered.wait(ctx)
	return d.activity.Flush(ctx)
}

func (d *Daemon) handleActivityList(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	// Records still queued for the batch writer belong in the answer.
	if err := d.settleActivity(r.Context()); err != nil {
		return err
	}
	recs, err := d.activity.List(r.Context(), f)
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []activity.Record{}
	}
	return writeJSON(w, recs)
}

func (d *Daemon) handleActivityGet(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return badRequest("activity id must be a number")
	}
	if err := d.settleActivity(r.Context()); err != nil {
		return err
	}
	rec, err := d.activity.Get(r.Context(), id)
	if errors.Is(err, activity.ErrNotFound) {
		return notFound("no activity record %d", id)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, rec)
}

// handleActivityFollow streams records as NDJSON as calls complete.
func (d *Daemon) handleActivityFollow(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	ch, cancel := d.activity.Subscribe(f)
	defer cancel()
	out := newNDJSON(w)
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-d.shutdown:
			return nil
		case rec, ok := <-ch:
			if !ok {
				return nil
			}
			if out.send(rec) != nil {
				return nil
			}
		}
	}
}

// handleActivityExport streams every matching record as NDJSON, oldest
// first, in constant memory; the CLI turns it into JSONL or CSV.
func (d *Daemon) handleActivityExport(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	if err := d.settleActivity(r.Context()); err != nil {
		return err
	}
	out := newNDJSON(w)
	_ = d.activity.Export(r.Context(), f, func(rec activity.Record) error { return out.send(rec) })
	return nil
}

func (d *Daemon) handleActivitySummary(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	by := api.SummaryGroup(r.URL.Query())
	if err := d.settleActivity(r.Context()); err != nil {
		return err
	}
	rows, err := d.activity.Summary(r.Context(), f, by)
	if err != nil {
		return badRequest("%v", err)
	}
	if rows == nil {
		rows = []activity.SummaryRow{}
	}
	return writeJSON(w, rows)
}
