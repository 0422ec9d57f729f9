package proxyd

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/activity"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

func (d *Daemon) activityRoutes(handle func(string, handler)) {
	handle("GET /v1/activity", d.handleActivityList)
	handle("GET /v1/activity/follow", d.handleActivityFollow)
	handle("GET /v1/activity/export", d.handleActivityExport)
	handle("GET /v1/activity/summary", d.handleActivitySummary)
	handle("GET /v1/activity/{id}", d.handleActivityGet)
	handle("GET /v1/health", d.handleHealth)
}

// filterFromQuery reads an activity.Filter from query parameters; the CLI
// validates vocabulary, the daemon re-checks times and numbers.
func filterFromQuery(q url.Values) (activity.Filter, error) {
	f := activity.Filter{
		Servers:      api.SplitList(q["server"]),
		Tools:        api.SplitList(q["tool"]),
		Statuses:     api.SplitList(q["status"]),
		ErrorClasses: api.SplitList(q["error_class"]),
		FaultDomains: api.SplitList(q["fault_domain"]),
		Replicas:     api.SplitList(q["replica"]),
	}
	var err error
	if v := q.Get("since"); v != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return f, badRequest("since: %v", err)
		}
	}
	if v := q.Get("until"); v != "" {
		if f.Until, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return f, badRequest("until: %v", err)
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 0 {
			return f, badRequest("limit must be a non-negative number")
		}
	}
	return f, nil
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
	if err := d.activity.Flush(r.Context()); err != nil {
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
	if err := d.activity.Flush(r.Context()); err != nil {
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
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	enc := json.NewEncoder(w)
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
			if err := enc.Encode(rec); err != nil {
				return nil
			}
			if fl != nil {
				fl.Flush()
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
	if err := d.activity.Flush(r.Context()); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	return d.activity.Export(r.Context(), f, func(rec activity.Record) error { return enc.Encode(rec) })
}

func (d *Daemon) handleActivitySummary(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return err
	}
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "server"
	}
	if err := d.activity.Flush(r.Context()); err != nil {
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

// handleHealth answers for every live replica sharing the state: this
// one's servers live, the others' as they last published them.
func (d *Daemon) handleHealth(w http.ResponseWriter, r *http.Request) error {
	want := r.URL.Query().Get("server")
	replicas := api.SplitList(r.URL.Query()["replica"])
	out := []api.ServerStatus{}
	known := false
	for _, st := range d.replicaServers(r.Context()) {
		if want != "" && st.Name != want {
			continue
		}
		known = true
		if len(replicas) == 0 || slices.Contains(replicas, st.Replica) {
			out = append(out, st)
		}
	}
	if want != "" && !known {
		return notFound("no server named %q", want)
	}
	return writeJSON(w, out)
}
