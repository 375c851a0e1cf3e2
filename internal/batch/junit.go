package batch

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// The JUnit XML that CI systems (GitHub Actions reporters, GitLab, Jenkins,
// CircleCI) read: the common subset of the Ant schema. Text is escaped by
// encoding/xml, which also replaces characters XML cannot carry (a terminal
// escape in an answer) with U+FFFD, so the report always parses.
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
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitSkipped `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// Report names a batch for its reports.
type Report struct {
	// Name is the suite's name, the cases file without its extension.
	Name string
	// File is the cases file, as given.
	File    string
	Started time.Time
	// Version is terp's, for the Markdown report.
	Version string
	// Dir is the directory the HTML report is written in: its links to the
	// artifacts are relative to it, so that the report and the artifacts
	// can be moved, or served, together. "" is the working directory.
	Dir string
}

// WriteJUnit writes a JUnit XML report: one testsuite per model, one
// testcase per run (named by case id, and "(run N)" when cases repeat), with
// a failure element for a failed run, an error element for an errored one
// and a skipped element for one that never finished because the batch was
// interrupted. The answer goes to system-out.
func WriteJUnit(w io.Writer, rep Report, runs []Run, results []Result) error {
	bySeq := make(map[int]Result, len(results))
	for _, r := range results {
		bySeq[r.seq] = r
	}
	repeated := false
	for _, run := range runs {
		repeated = repeated || run.N > 1
	}
	out := junitSuites{Name: rep.Name}
	index := map[string]int{}
	var total time.Duration
	var durations []time.Duration // per suite
	for _, run := range runs {
		i, ok := index[run.Model]
		if !ok {
			i = len(out.Suites)
			index[run.Model] = i
			out.Suites = append(out.Suites, junitSuite{
				Name:      fmt.Sprintf("%s (%s)", rep.Name, run.Model),
				Timestamp: rep.Started.UTC().Format("2006-01-02T15:04:05"),
			})
			durations = append(durations, 0)
		}
		s := &out.Suites[i]
		tc := junitCase{Name: run.Case.ID, Classname: rep.Name + "." + pathSafe(run.Model), File: rep.File, Line: run.Case.Line}
		if repeated {
			tc.Name += fmt.Sprintf(" (run %d)", run.N)
		}
		s.Tests++
		r, done := bySeq[run.Seq]
		switch {
		case !done:
			s.Skipped++
			tc.Time = "0.000"
			tc.Skipped = &junitSkipped{Message: "not run to the end: the batch was interrupted"}
		case r.Status == Failed:
			s.Failures++
			tc.Failure = &junitProblem{Message: strings.Join(r.Reasons, "; "), Type: string(Failed), Text: problemText(r)}
		case r.Status == Errored:
			s.Errors++
			tc.Error = &junitProblem{Message: strings.Join(r.Reasons, "; "), Type: string(Errored), Text: problemText(r)}
		}
		if done {
			tc.Time = seconds(r.Duration())
			durations[i] += r.Duration()
			total += r.Duration()
			tc.SystemOut = systemOut(r)
		}
		s.Cases = append(s.Cases, tc)
	}
	for i := range out.Suites {
		s := &out.Suites[i]
		s.Time = seconds(durations[i])
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func problemText(r Result) string {
	var b strings.Builder
	for _, reason := range r.Reasons {
		b.WriteString(reason)
		b.WriteByte('\n')
	}
	return b.String()
}

func systemOut(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: %s\nsteps: %d\ntokens: %d\n", r.Model, r.Steps, r.Usage.TotalTokens)
	if r.ConversationID != "" {
		fmt.Fprintf(&b, "conversation: %s (terp sessions show %s)\n", r.ConversationID, r.ConversationID)
	}
	for _, f := range r.Files {
		fmt.Fprintf(&b, "file: %s (%d bytes)", f.SandboxPath, f.Bytes)
		if f.Path != "" {
			fmt.Fprintf(&b, " -> %s", f.Path)
		}
		b.WriteByte('\n')
	}
	if r.Answer != "" {
		b.WriteString("\n" + r.Answer + "\n")
	}
	return b.String()
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
