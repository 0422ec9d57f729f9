package oauth

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads one child of a counter vector.
func counterValue(t *testing.T, cv *prometheus.CounterVec, outcome Outcome) float64 {
	t.Helper()
	var m dto.Metric
	if err := cv.WithLabelValues(string(outcome)).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// dumpMetrics renders every series of cv, for leak checks.
func dumpMetrics(t *testing.T, cv *prometheus.CounterVec) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(cv); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, mf := range mfs {
		out += fmt.Sprint(mf.String())
	}
	return out
}
