package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/batch"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// batchEnv is a terp environment whose data directory the test can look
// into, pointed at the fake model server s.
type batchEnv struct {
	env     map[string]string
	dir     string // a scratch directory for suites and reports
	dataDir string // $XDG_DATA_HOME/terp
}

func newBatchEnv(t *testing.T, s *llmtest.Server) batchEnv {
	t.Helper()
	home := terptest.TempDir(t)
	env := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
		"TERP_EXEC_MODE":  "script", // no case needs variables to survive a step
	}
	if s != nil {
		env["TERP_BASE_URL"] = s.BaseURL()
		env["TERP_MODEL"] = "test-model"
	}
	return batchEnv{env: env, dir: terptest.TempDir(t), dataDir: filepath.Join(home, "data", "terp")}
}

// run runs one terp command line in this environment until ctx is done.
func (e batchEnv) run(ctx context.Context, stdin string, args ...string) result {
	var out, errOut bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	f.Getenv = func(k string) string { return e.env[k] }
	code := Run(ctx, f, args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// write puts a file in the scratch directory and returns its path.
func (e batchEnv) write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// casesJSONL writes one case per line.
func casesJSONL(cases ...map[string]any) string {
	var b strings.Builder
	for _, c := range cases {
		line, _ := json.Marshal(c)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// askedQuestion is the question a request asks, without the notes terp puts
// before it.
func askedQuestion(req llmtest.Request) string {
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		q := m.Content
		if strings.HasPrefix(q, "(") {
			if i := strings.LastIndex(q, ")\n\n"); i >= 0 {
				q = q[i+3:]
			}
		}
		return q
	}
	return ""
}

// opensTurn tells whether req opens its turn: no tool output yet.
func opensTurn(req llmtest.Request) bool { return req.LastTool() == "" }

// scriptedModel starts a fake model whose every reply comes from reply, which
// looks at the request (its question, its model, the tool output) to
// decide: concurrent cases interleave, so no fixed sequence can script them.
func scriptedModel(t testing.TB, reply func(llmtest.Request) llmtest.Reply) *llmtest.Server {
	steps := make([]llmtest.Step, 2000)
	for i := range steps {
		steps[i] = reply
	}
	return llmtest.New(t, steps...)
}

// runThenAnswer runs code, then answers with answer(stdout).
func runThenAnswer(t *testing.T, req llmtest.Request, code string, answer func(stdout string) string) llmtest.Reply {
	if opensTurn(req) {
		return llmtest.RunPython(code)
	}
	res, err := req.ToolResult()
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the code for %q failed: %v %+v", askedQuestion(req), err, res)
	}
	return llmtest.Answer(answer(strings.TrimSpace(res.Stdout)))
}

func readBatchResults(t *testing.T, path string) []batch.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []batch.Result
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r batch.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("results line is not JSON: %v\n%s", err, line)
		}
		out = append(out, r)
	}
	return out
}

func resultsByID(results []batch.Result) map[string]batch.Result {
	m := map[string]batch.Result{}
	for _, r := range results {
		m[r.ID] = r
	}
	return m
}

// TestBatchJudgesEveryKindOfExpectation runs a suite where some cases pass,
// one fails on each kind of expectation and two error (a server error that
// persists through the client's retries, and a refused key), all at once:
// each gets its verdict and reasons, in the results file, the JUnit report
// and the exit code, and the errors stop no other case.
func TestBatchJudgesEveryKindOfExpectation(t *testing.T) {
	var serverErrors atomic.Int32
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		q := askedQuestion(req)
		switch q {
		case "growth":
			return runThenAnswer(t, req, `import csv
rows = list(csv.DictReader(open("/work/sales.csv")))
rev = [int(r["revenue"]) for r in rows]
growth = [b - a for a, b in zip(rev, rev[1:])]
i = growth.index(max(growth)) + 1
print(rows[i]["month"], growth[i - 1], round(100 * growth[i - 1] / rev[i - 1], 1))`,
				func(out string) string {
					f := strings.Fields(out)
					n := 0
					fmt.Sscan(f[1], &n)
					return fmt.Sprintf("December (%s) grew the most: revenue rose by %s,%03d (%s%%).", f[0], fmt.Sprint(n/1000), n%1000, f[2])
				})
		case "chart":
			// A real chart: batch reads an expected PNG back, and a blank
			// or fake one does not pass.
			code := "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.savefig('/work/chart.png')"
			return runThenAnswer(t, req, code, func(string) string { return "Saved chart.png." })
		case "contains":
			return llmtest.Answer("The month was November.")
		case "regex":
			return llmtest.Answer("Revenue peaked in december.")
		case "number":
			return llmtest.Answer("It is 12.7, or 3 at most.")
		case "files":
			return runThenAnswer(t, req, `print("no chart")`, func(string) string { return "I made no chart." })
		case "server error":
			serverErrors.Add(1)
			return llmtest.Reply{Status: 500, Body: `{"error":{"message":"CUDA error: an illegal memory access was encountered"}}`}
		case "bad key":
			return llmtest.Reply{Status: 401, Body: `{"error":{"message":"Invalid API key"}}`}
		}
		t.Errorf("unexpected question %q", q)
		return llmtest.Answer("?")
	})
	e := newBatchEnv(t, s)
	sales := salesCSV(t)
	cases := e.write(t, "cases.jsonl", casesJSONL(
		map[string]any{"id": "growth", "question": "growth", "files": []string{sales},
			"expect": map[string]any{"contains": []string{"DECEMBER"}, "regex": `2025-1\d`, "number": map[string]any{"value": 26450, "tolerance": 0.5}}},
		map[string]any{"id": "chart", "question": "chart", "expect": map[string]any{"files": []string{"chart.png"}}},
		map[string]any{"id": "contains", "question": "contains", "expect": map[string]any{"contains": []string{"December"}}},
		map[string]any{"id": "regex", "question": "regex", "expect": map[string]any{"regex": "December"}},
		map[string]any{"id": "number", "question": "number", "expect": map[string]any{"number": map[string]any{"value": 12.5, "tolerance": 0.01}}},
		map[string]any{"id": "files", "question": "files", "expect": map[string]any{"files": []string{"chart.png"}}},
		map[string]any{"id": "server-error", "question": "server error"},
		map[string]any{"id": "bad-key", "question": "bad key"},
	))
	out, junit, artifacts := filepath.Join(e.dir, "results.jsonl"), filepath.Join(e.dir, "report.xml"), filepath.Join(e.dir, "artifacts")
	page := filepath.Join(e.dir, "report.html")
	start := time.Now()
	r := e.run(context.Background(), "", "batch", "--out", out, "--junit", junit, "--html", page, "--artifacts", artifacts, cases)
	t.Logf("the batch took %s", time.Since(start).Round(time.Millisecond))
	if r.code != exitError {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, exitError, r.stdout, r.stderr)
	}

	want := map[string]struct {
		status batch.Status
		reason string
	}{
		"growth":       {batch.Passed, ""},
		"chart":        {batch.Passed, ""},
		"contains":     {batch.Failed, `answer does not contain "December"`},
		"regex":        {batch.Failed, `answer does not match the regex "December"`},
		"number":       {batch.Failed, "no number within 0.01 of 12.5 (found 12.7, 3)"},
		"files":        {batch.Failed, "file chart.png was not saved (no files were saved)"},
		"server-error": {batch.Errored, "HTTP 500 Internal Server Error: CUDA error"},
		"bad-key":      {batch.Errored, "requires an API key"},
	}
	results := readBatchResults(t, out)
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, id := range []string{"growth", "chart", "contains", "regex", "number", "files", "server-error", "bad-key"} {
		if results[i].ID != id {
			t.Errorf("result %d is %s, want %s: the file ends in suite order", i, results[i].ID, id)
		}
	}
	for id, w := range want {
		got := resultsByID(results)[id]
		if got.Status != w.status {
			t.Errorf("%s: %s %q, want %s", id, got.Status, got.Reasons, w.status)
		}
		if w.reason == "" && len(got.Reasons) != 0 || w.reason != "" && (len(got.Reasons) != 1 || !strings.Contains(got.Reasons[0], w.reason)) {
			t.Errorf("%s: reasons %q, want one saying %q", id, got.Reasons, w.reason)
		}
	}
	if n := serverErrors.Load(); n != 5 {
		t.Errorf("the server error was sent %d times, want 5 (4 retries)", n)
	}

	growth := resultsByID(results)["growth"]
	if growth.Steps != 2 || growth.Usage.TotalTokens != 220 || growth.DurationMS <= 0 || growth.Model != "test-model" || growth.Run != 1 || growth.Line != 1 ||
		!strings.HasPrefix(growth.Answer, "December (2025-12) grew the most: revenue rose by 26,450 (14.0%)") {
		t.Errorf("growth = %+v", growth)
	}
	chart := resultsByID(results)["chart"]
	wantPath := filepath.Join(artifacts, "chart", "chart.png")
	if len(chart.Files) != 1 || chart.Files[0].SandboxPath != "/work/chart.png" || chart.Files[0].Path != wantPath {
		t.Errorf("chart files = %+v, want /work/chart.png downloaded to %s", chart.Files, wantPath)
	}
	if b, err := os.ReadFile(wantPath); err != nil || !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") || len(b) != int(chart.Files[0].Bytes) {
		t.Errorf("artifact: %d bytes (%v), want the PNG of %d bytes", len(b), err, chart.Files[0].Bytes)
	}

	// Every case is a stored conversation of origin batch, paused.
	st, err := store.Open(e.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"growth", "chart", "contains"} {
		res := resultsByID(results)[id]
		conv, err := st.Load(res.ConversationID)
		if err != nil || conv.Origin != "batch" || conv.Title != id {
			t.Errorf("%s: conversation %q: %v %+v", id, res.ConversationID, err, conv)
		}
	}
	// A case refused at its first request still leaves its question stored.
	if id := resultsByID(results)["bad-key"].ConversationID; id == "" {
		t.Error("the refused case names no conversation")
	} else if conv, err := st.Load(id); err != nil || len(conv.Messages) < 2 || !strings.Contains(conv.Messages[1].Content, "bad key") {
		t.Errorf("the refused case's conversation %q does not hold its question: %v %+v", id, err, conv)
	}
	wantPausedConversations(t, e.dataDir)

	// The JUnit report.
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &rep); err != nil {
		t.Fatalf("JUnit report does not parse: %v\n%s", err, b)
	}
	if rep.Tests != 8 || rep.Failures != 4 || rep.Errors != 2 || len(rep.Suites) != 1 || rep.Suites[0].Name != "cases (test-model)" {
		t.Errorf("JUnit: %d tests, %d failures, %d errors in %d suites; want 8, 4, 2 in 1", rep.Tests, rep.Failures, rep.Errors, len(rep.Suites))
	}
	for _, c := range rep.Suites[0].Cases {
		w := want[c.Name]
		switch {
		case w.status == batch.Failed && (c.Failure == nil || !strings.Contains(c.Failure.Message, w.reason)),
			w.status == batch.Errored && (c.Error == nil || !strings.Contains(c.Error.Message, w.reason)),
			w.status == batch.Passed && (c.Failure != nil || c.Error != nil):
			t.Errorf("JUnit testcase %s does not say %s %q: %+v", c.Name, w.status, w.reason, c)
		}
	}

	// The HTML report: every failure's reason, and the chart linked
	// relative to the report.
	b, err = os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`<a href="artifacts/chart/chart.png">chart.png</a>`, "no number within 0.01 of 12.5 (found 12.7, 3)",
		"file chart.png was not saved (no files were saved)", "HTTP 500 Internal Server Error: CUDA error", `<rect class="bar"`} {
		if !strings.Contains(string(b), w) {
			t.Errorf("the HTML report lacks %s", w)
		}
	}

	// Without a terminal: a line per finished case, then the summary.
	for _, w := range []string{"] PASS  growth (2 steps", `] FAIL  contains (1 step`, "] ERROR bad-key",
		"test-model  2/8     4       2        25.0%", "FAILED number: no number within 0.01 of 12.5 (found 12.7, 3)"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout does not say %q:\n%s", w, r.stdout)
		}
	}
	// A failure's reasons are told once, in the summary.
	if n := strings.Count(r.stdout, "no number within 0.01 of 12.5"); n != 1 {
		t.Errorf("stdout tells the reason %d times, want once:\n%s", n, r.stdout)
	}
}

// TestBatchRunsCasesInParallelInTheirOwnSandboxes holds each case's first
// request until four are in flight at once (-j 4), and has each case's code
// leave a marker in /work and list it: no case may see another's.
func TestBatchRunsCasesInParallelInTheirOwnSandboxes(t *testing.T) {
	const jobs, n = 4, 8
	var mu sync.Mutex
	inFlight, most := 0, 0
	full := make(chan struct{})
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		if !opensTurn(req) {
			res, _ := req.ToolResult()
			return llmtest.Answer(strings.TrimSpace(res.Stdout))
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == jobs {
			close(full)
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		id := strings.TrimPrefix(askedQuestion(req), "case ")
		return llmtest.RunPython(fmt.Sprintf(`import os
open("/work/marker-%s", "w").write("%s")
print(" ".join(sorted(n for n in os.listdir("/work") if not n.startswith("."))))`, id, id))
	})
	e := newBatchEnv(t, s)
	var cases []map[string]any
	for i := range n {
		cases = append(cases, map[string]any{"id": fmt.Sprint(i), "question": fmt.Sprint("case ", i)})
	}
	out := filepath.Join(e.dir, "results.jsonl")
	r := e.run(context.Background(), "", "batch", "-j", fmt.Sprint(jobs), "--out", out, e.write(t, "cases.jsonl", casesJSONL(cases...)))
	if r.code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if most != jobs {
		t.Errorf("at most %d requests were in flight at once, want %d (-j %d)", most, jobs, jobs)
	}
	for _, res := range readBatchResults(t, out) {
		if want := "marker-" + res.ID; res.Answer != want {
			t.Errorf("case %s saw /work = %q, want only its own %s", res.ID, res.Answer, want)
		}
	}
}

// TestBatchRejectsABadSuiteBeforeAnyRequest checks that every kind of
// mistake in a suite is a usage error naming the line, before the model is
// asked anything.
func TestBatchRejectsABadSuiteBeforeAnyRequest(t *testing.T) {
	s := scriptedModel(t, func(llmtest.Request) llmtest.Reply { return llmtest.Answer("ok") })
	e := newBatchEnv(t, s)
	good := `{"question": "fine"}` + "\n"
	tests := []struct {
		name, text string
		args       []string
		want       []string
	}{
		{name: "bad JSON", text: good + `{"question": "x"` + "\n", want: []string{"cases.jsonl:2: invalid JSON"}},
		{name: "missing question", text: good + good + `{"id": "q3"}` + "\n", want: []string{`cases.jsonl:3: "question" is missing`}},
		{name: "unknown field", text: `{"question": "x", "expect": {"regexp": "a"}}` + "\n", want: []string{`cases.jsonl:1: unknown field "expect.regexp"`}},
		{name: "missing file", text: good + `{"question": "x", "files": ["nope.csv"]}` + "\n", want: []string{`cases.jsonl:2: file "nope.csv"`, "no such file"}},
		{name: "no cases file", args: []string{"batch", filepath.Join(e.dir, "missing.jsonl")}, want: []string{"cannot read the cases", "missing.jsonl"}},
		{name: "no argument", args: []string{"batch"}, want: []string{"give one cases file"}},
		{name: "bad -j", text: good, args: []string{"batch", "-j", "0"}, want: []string{"-j must be at least 1"}},
		{name: "bad --models", text: good, args: []string{"batch", "--models", "a,,b"}, want: []string{"--models has an empty name"}},
		{name: "bad config flag", text: good, args: []string{"batch", "--timeout", "soon"}, want: []string{"--timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.text != "" {
				args = append(append([]string{}, args...), e.write(t, "cases.jsonl", tt.text))
				if tt.args == nil {
					args = []string{"batch", args[0]}
				}
			}
			r := e.run(context.Background(), "", args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("the model got %d requests, want none", n)
	}
}

// TestBatchComparesModels runs every case with two models, one of which
// gets half of them wrong, and checks the comparison.
func TestBatchComparesModels(t *testing.T) {
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		if req.Model == "weak" && strings.HasSuffix(askedQuestion(req), "odd") {
			return llmtest.Reply{Content: "no idea", CompletionTokens: 40}
		}
		return llmtest.Reply{Content: "42", CompletionTokens: 10}
	})
	e := newBatchEnv(t, s)
	var cases []map[string]any
	for i := range 4 {
		parity := []string{"even", "odd"}[i%2]
		cases = append(cases, map[string]any{"id": fmt.Sprint("c", i), "question": "q " + parity, "model": "ignored",
			"expect": map[string]any{"number": 42}})
	}
	out := filepath.Join(e.dir, "results.jsonl")
	r := e.run(context.Background(), "", "batch", "--models", "strong,weak", "--out", out, e.write(t, "cases.jsonl", casesJSONL(cases...)))
	if r.code != exitError {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitError, r.stderr)
	}
	for _, w := range []string{
		"MODEL   PASSED  FAILED  ERRORED  PASS RATE  STEPS  TOKENS  TIME",
		"strong  4/4     0       0        100.0%     1.0    110",
		"weak    2/4     2       0        50.0%      1.0    125",
		`FAILED c1 [weak]: no number equal to 42 (the answer has no numbers)`,
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout does not say %q:\n%s", w, r.stdout)
		}
	}
	results := readBatchResults(t, out)
	if len(results) != 8 || results[0].Model != "strong" || results[1].Model != "weak" {
		t.Errorf("results = %+v; want every case with both models, --models replacing the case's own", results)
	}
}

// TestBatchRepeatReportsPassAtK repeats cases three times with a model that
// is right on a case's first run only, always, or never.
func TestBatchRepeatReportsPassAtK(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		q := askedQuestion(req)
		mu.Lock()
		asked[q]++
		n := asked[q]
		mu.Unlock()
		switch {
		case q == "always", q == "once" && n == 1:
			return llmtest.Answer("yes")
		}
		return llmtest.Answer("no")
	})
	e := newBatchEnv(t, s)
	cases := e.write(t, "cases.jsonl", casesJSONL(
		map[string]any{"id": "always", "question": "always", "expect": map[string]any{"contains": "yes"}},
		map[string]any{"id": "once", "question": "once", "expect": map[string]any{"contains": "yes"}},
		map[string]any{"id": "never", "question": "never", "expect": map[string]any{"contains": "yes"}},
	))
	artifacts := filepath.Join(e.dir, "artifacts")
	r := e.run(context.Background(), "", "batch", "--repeat", "3", "--json", "--artifacts", artifacts, cases)
	if r.code != exitError {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	// pass@1 = 4 passing runs of 9; pass@3 = 2 cases of 3 passed at least
	// once; pass^3 = 1 case of 3 passed every time.
	for _, w := range []string{"PASS@1  PASS@3  PASS^3", "test-model  9/9   4       5       0        44.4%   66.7%   33.3%"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the summary (on stderr with --json) does not say %q:\n%s", w, r.stderr)
		}
	}
	var runs []batch.Result
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var res batch.Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("stdout is not JSON lines: %v\n%s", err, r.stdout)
		}
		runs = append(runs, res)
	}
	if len(runs) != 9 {
		t.Fatalf("%d JSON lines, want 9", len(runs))
	}
	seen := map[string]bool{}
	for _, res := range runs {
		seen[fmt.Sprintf("%s/%d", res.ID, res.Run)] = true
	}
	if !seen["once/1"] || !seen["once/3"] || !seen["never/2"] {
		t.Errorf("runs = %v, want runs 1 to 3 of each case", seen)
	}
}

// TestBatchInterruptKeepsFinishedResults cancels a batch while one case's
// code runs: the cases that finished are in the results file and the JUnit
// report, the unfinished one is reported as skipped, nothing is left
// running, and terp exits 130.
func TestBatchInterruptKeepsFinishedResults(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleeping := make(chan struct{})
	var once sync.Once
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		if askedQuestion(req) != "slow" {
			return llmtest.Answer("done")
		}
		if opensTurn(req) {
			once.Do(func() { close(sleeping) })
			return llmtest.RunPython("import time\ntime.sleep(300)")
		}
		return llmtest.Answer("woke up")
	})
	e := newBatchEnv(t, s)
	cases := e.write(t, "cases.jsonl", casesJSONL(
		map[string]any{"id": "quick-1", "question": "quick"},
		map[string]any{"id": "slow", "question": "slow"},
		map[string]any{"id": "quick-2", "question": "quick"},
	))
	out, junit := filepath.Join(e.dir, "results.jsonl"), filepath.Join(e.dir, "report.xml")
	go func() {
		<-sleeping
		// Let the quick cases finish and the slow code start.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(out); strings.Count(string(b), "\n") == 2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	r := e.run(ctx, "", "batch", "-j", "3", "--out", out, "--junit", junit, cases)
	if r.code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, exitInterrupted, r.stdout, r.stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the interrupted batch took %s to stop", took)
	}
	results := readBatchResults(t, out)
	if len(results) != 2 || results[0].ID != "quick-1" || results[1].ID != "quick-2" {
		t.Errorf("results = %+v, want the two quick cases", results)
	}
	if !strings.Contains(r.stderr, "interrupted: 2 of 3 runs finished; reported in "+out) {
		t.Errorf("stderr = %s", r.stderr)
	}
	b, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(b), `tests="3" failures="0" errors="0" skipped="1"`) {
		t.Errorf("JUnit report (%v):\n%s", err, b)
	}
	wantPausedConversations(t, e.dataDir)
}

// TestExampleSuite runs examples/batch/cases.jsonl as shipped, in the
// default kernel mode, with a model that answers each question by running a
// reference solution on the real files: the example's expectations must
// hold for right answers.
func TestExampleSuite(t *testing.T) {
	solutions := map[string]string{
		"Which month had the largest": `import pandas as pd
df = pd.read_csv("/work/sales.csv"); g = df["revenue"].diff(); i = g.idxmax()
print(f"{df['month'][i]}: revenue grew by {int(g[i]):,}")`,
		"total revenue": `import pandas as pd
print(f"{pd.read_csv('/work/sales.csv')['revenue'].sum():,}")`,
		"By what percentage": `import pandas as pd
r = pd.read_csv("/work/sales.csv")["revenue"]
print(f"{100 * (r.iloc[-1] / r.iloc[0] - 1):.1f}%")`,
		"Plot monthly revenue": `import pandas as pd, matplotlib.pyplot as plt
pd.read_csv("/work/sales.csv").plot(x="month", y="revenue"); plt.savefig("/work/revenue.png")
print("saved")`,
		"no unit price": `import pandas as pd
print(pd.read_csv("/work/orders.csv")["unit_price"].isna().sum(), "orders")`,
		"highest total order value": `import pandas as pd
df = pd.read_csv("/work/orders.csv").dropna(subset=["unit_price"])
print((df.quantity * df.unit_price).groupby(df.region).sum().idxmax())`,
		"mean quantity": `import pandas as pd
print(round(pd.read_csv("/work/orders.csv")["quantity"].mean(), 2))`,
	}
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply {
		for key, code := range solutions {
			if strings.Contains(askedQuestion(req), key) {
				return runThenAnswer(t, req, code, func(out string) string { return "The answer: " + out })
			}
		}
		t.Errorf("no reference solution for %q", askedQuestion(req))
		return llmtest.Answer("?")
	})
	e := newBatchEnv(t, s)
	delete(e.env, "TERP_EXEC_MODE") // as a user runs it: one kernel per case
	r := e.run(context.Background(), "", "batch", "../../examples/batch/cases.jsonl")
	if r.code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "test-model  7/7") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	wantPausedConversations(t, e.dataDir)
}

// TestBatchShowsABarOnATerminal checks the two faces of progress: a bar
// redrawn in place on a terminal, with the runs that did not pass printed
// above it; plain lines when CI is set, even on a terminal.
func TestBatchShowsABarOnATerminal(t *testing.T) {
	s := scriptedModel(t, func(req llmtest.Request) llmtest.Reply { return llmtest.Answer(askedQuestion(req)) })
	e := newBatchEnv(t, s)
	cases := e.write(t, "cases.jsonl", casesJSONL(
		map[string]any{"id": "right", "question": "yes", "expect": map[string]any{"contains": "yes"}},
		map[string]any{"id": "wrong", "question": "no", "expect": map[string]any{"contains": "yes"}},
	))
	run := func(ci string) result {
		e.env["CI"] = ci
		var out, errOut bytes.Buffer
		f := NewFactory()
		f.IO = IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, StdoutTTY: true, StderrTTY: true}
		f.Getenv = func(k string) string { return e.env[k] }
		code := Run(context.Background(), f, []string{"batch", cases})
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}

	r := run("")
	if r.code != exitError {
		t.Fatalf("exit %d; stderr:\n%q", r.code, r.stderr)
	}
	for _, w := range []string{"\r", "2/2", "1 passed", "1 failed", "0 errored", "\x1b[K", `FAIL  wrong (1 step`} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the terminal's stderr does not show %q:\n%q", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "PASS  right") || strings.Contains(r.stdout, "[1/2]") {
		t.Errorf("a passing run or a plain line was printed on the terminal:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "test-model  1/2") {
		t.Errorf("no summary on stdout:\n%s", r.stdout)
	}

	r = run("true")
	if strings.Contains(r.stderr, "\r") || !strings.Contains(r.stdout, "[1/2] PASS  right") && !strings.Contains(r.stdout, "[2/2] PASS  right") {
		t.Errorf("with CI set, want plain lines and no bar:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
}

func TestBatchHelpHasExamples(t *testing.T) {
	r := newBatchEnv(t, nil).run(context.Background(), "", "batch", "--help")
	for _, w := range []string{"Examples:", "RE2", "ignoring case", "pass@1", "--artifacts", "--timeout"} {
		if r.code != 0 || !strings.Contains(r.stdout, w) {
			t.Errorf("terp batch --help (exit %d) does not say %q:\n%s", r.code, w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "-o, --out") {
		t.Errorf("batch has ask's -o, --out DIR; --out is the results file:\n%s", r.stdout)
	}
}
