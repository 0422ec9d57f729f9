package api

import (
	"net/url"
	"reflect"
	"testing"
)

// The activity filter grammar (lists repeated or comma-separated, RFC 3339
// times, a limit, an id to resume after) on any query: an error or a query that encodes back to
// itself.
func FuzzParseActivityQuery(f *testing.F) {
	for _, s := range []string{
		"server=a,b&server=c&tool=echo&status=error&error_class=timeout,network&fault_domain=upstream",
		"since=2026-01-02T15:04:05Z&until=2026-01-03T00:00:00.5%2B02:00&limit=100",
		"limit=-1", "limit=99999999999999999999", "since=yesterday", "server=,,%20,", "%zz",
		"after=12", "after=-3", "after=+7", "after=9223372036854775808",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseActivityQuery(v)
		if err != nil {
			return
		}
		if q.Limit < 0 || q.After < 0 {
			t.Fatalf("negative limit %d or id %d from %q", q.Limit, q.After, raw)
		}
		again, err := ParseActivityQuery(q.Values())
		if err != nil {
			t.Fatalf("%q parsed, its encoding %q does not: %v", raw, q.Values().Encode(), err)
		}
		if !reflect.DeepEqual(norm(again), norm(q)) {
			t.Fatalf("%q: parsed %+v, encoded and parsed again %+v", raw, q, again)
		}
	})
}

// norm makes times comparable by instant (the encoding is UTC).
func norm(q ActivityQuery) ActivityQuery {
	q.Since, q.Until = q.Since.UTC(), q.Until.UTC()
	return q
}
