package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit XML valid against the Apache Ant JUnit schema (Windy Road), the
// one CI test reporters (Jenkins, GitLab, GitHub's report actions) are
// built around: one testsuite per target, one testcase per check that ran
// plus the target's outcome.
//
// The schema is strict, and the report follows it: testsuites carries no
// attributes (readers total the suites), every testsuite has its id,
// package, timestamp and hostname, properties, system-out and system-err;
// a testcase holds only a failure. So passing checks' messages and
// warnings go to the suite's system-out, named by check, and a skipped
// check is no test case (the schema has no skipped element): it is
// listed in system-out as skipped, with why.

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Package    string          `xml:"package,attr"`
	ID         int             `xml:"id,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out"`
	SystemErr  string          `xml:"system-err"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(ms float64) string { return fmt.Sprintf("%.3f", ms/1000) }

// junitTimestamp is the schema's ISO 8601 pattern: UTC, no zone suffix.
const junitTimestamp = "2006-01-02T15:04:05"

// WriteJUnit writes r as a JUnit XML report.
func WriteJUnit(w io.Writer, r Run) error {
	host := r.Host
	if host == "" {
		host = "localhost" // what the schema asks for when it is unknown
	}
	var all junitSuites
	for i, t := range r.Targets {
		s := junitSuite{Name: t.Name, Package: r.Tool, ID: i, Timestamp: r.Started.UTC().Format(junitTimestamp),
			Hostname: host, Time: seconds(t.DurationMS)}
		if t.URL != "" {
			s.Properties = append(s.Properties, junitProperty{Name: "url", Value: t.URL})
		}
		s.Properties = append(s.Properties, junitProperty{Name: "outcome", Value: t.Outcome})
		class := t.Name
		var out strings.Builder
		for _, c := range t.Checks {
			tc := junitCase{Name: c.Name, Classname: class, Time: seconds(c.DurationMS)}
			switch {
			case c.Status == Fail || c.Status == Warn && r.FailOnWarn:
				typ := string(c.Status)
				if c.Rule != nil {
					typ = c.Rule.ID + " " + c.Rule.Name
				}
				tc.Failure = &junitFailure{Message: c.Message, Type: typ, Text: c.Message}
				s.Failures++
			case c.Status == Skip:
				fmt.Fprintf(&out, "%s: skipped: %s\n", c.Name, c.Message)
				continue
			case c.Status == Warn:
				fmt.Fprintf(&out, "%s: warning: %s\n", c.Name, c.Message)
			default:
				fmt.Fprintf(&out, "%s: %s\n", c.Name, c.Message)
			}
			s.Cases = append(s.Cases, tc)
		}
		verdict := junitCase{Name: "outcome", Classname: class, Time: seconds(t.DurationMS)}
		if t.Passed {
			fmt.Fprintf(&out, "outcome: %s\n", t.Outcome)
		} else {
			verdict.Failure = &junitFailure{Message: t.Outcome, Type: "outcome", Text: t.Outcome}
			s.Failures++
		}
		s.Cases = append(s.Cases, verdict)
		s.Tests = len(s.Cases)
		s.SystemOut = out.String()
		all.Suites = append(all.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
