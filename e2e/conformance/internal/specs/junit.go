package specs

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"
)

// Result is one spec's outcome in one run.
type Result struct {
	// Name is Ginkgo's full text without the "[It] " leaf prefix.
	Name string `json:"name"`
	// State is passed, failed, skipped (upstream's own skip, at run time),
	// not run (left out by the focus, or not reached before the suite's
	// timeout) or absent (not in the report).
	State   string  `json:"state"`
	Seconds float64 `json:"seconds"`
	// Message is the failure's or the skip's message, first line.
	Message string `json:"message,omitempty"`
}

// States a Result can have.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
	// NotReached is Ginkgo's bare "skipped": the spec did not run.
	NotReached = "not run"
	Absent     = "absent"
)

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
	Skipped *junitMessage `xml:"skipped"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// ReadJUnit parses a JUnit file Ginkgo wrote (e2e.test --report-dir) into
// results by spec name. Ginkgo lists every spec of the suite; those that did
// not run are NotReached. Find picks the set's.
func ReadJUnit(path string) (map[string]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read junit: %w", err)
	}
	return ParseJUnit(b)
}

// ParseJUnit is ReadJUnit on the file's bytes.
func ParseJUnit(b []byte) (map[string]Result, error) {
	var s junitSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse junit: %w", err)
	}
	out := map[string]Result{}
	for _, ts := range s.Suites {
		for _, c := range ts.Cases {
			r := Result{Name: strings.TrimPrefix(c.Name, "[It] "), Seconds: c.Time}
			switch {
			case c.Failure != nil:
				r.State, r.Message = Failed, firstLine(c.Failure.Message, c.Failure.Body)
			case c.Error != nil:
				r.State, r.Message = Failed, firstLine(c.Error.Message, c.Error.Body)
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				r.State = Skipped
				if c.Skipped != nil {
					r.Message = firstLine(c.Skipped.Message, c.Skipped.Body)
				}
				// A spec skipped at run time says why ("skipped - need at
				// least 3 zones…"); one the focus left out, or the suite's
				// timeout never reached, is the bare word.
				if r.Message == "" || r.Message == "skipped" {
					r.State, r.Message = NotReached, ""
				}
			case c.Status == "passed" || c.Status == "":
				r.State = Passed
			default: // interrupted, aborted, panicked, timedout
				r.State, r.Message = Failed, c.Status
			}
			out[r.Name] = r
		}
	}
	return out, nil
}

// firstLine is the first non-empty line of the message, else of the body.
func firstLine(msg, body string) string {
	for _, s := range []string{msg, body} {
		for l := range strings.SplitSeq(s, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				return l
			}
		}
	}
	return ""
}
