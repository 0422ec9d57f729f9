package report

import (
	"encoding/xml"
	"fmt"
	"io"
)

// JUnit XML as CI test reporters read it (the Ant/Jenkins dialect): one
// testsuite per target, one testcase per check plus the target's outcome.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
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
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

func seconds(ms float64) string { return fmt.Sprintf("%.3f", ms/1000) }

// WriteJUnit writes r as a JUnit XML report.
func WriteJUnit(w io.Writer, r Run) error {
	all := junitSuites{Name: r.Tool}
	total := 0.0
	for _, t := range r.Targets {
		s := junitSuite{Name: t.Name, Time: seconds(t.DurationMS)}
		if t.URL != "" {
			s.Properties = append(s.Properties, junitProperty{Name: "url", Value: t.URL})
		}
		s.Properties = append(s.Properties, junitProperty{Name: "outcome", Value: t.Outcome})
		class := t.Name
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
				tc.Skipped = &junitSkipped{Message: c.Message}
				s.Skipped++
			case c.Status == Warn:
				tc.SystemOut = "warning: " + c.Message
			default:
				tc.SystemOut = c.Message
			}
			s.Cases = append(s.Cases, tc)
		}
		verdict := junitCase{Name: "outcome", Classname: class, Time: seconds(t.DurationMS)}
		if t.Passed {
			verdict.SystemOut = t.Outcome
		} else {
			verdict.Failure = &junitFailure{Message: t.Outcome, Type: "outcome", Text: t.Outcome}
			s.Failures++
		}
		s.Cases = append(s.Cases, verdict)
		s.Tests = len(s.Cases)
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Skipped += s.Skipped
		total += t.DurationMS
		all.Suites = append(all.Suites, s)
	}
	all.Time = seconds(total)
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
