package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/batch"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// publishedAnswers are the ANSWER lines of the suite's public-data cases as
// the published data sets give them: what a model that remembers iris,
// penguins, wine, breast cancer and diabetes would answer without looking.
var publishedAnswers = map[string]string{
	"loading-iris-versicolor":           "1.33 cm",
	"loading-cancer-malignant-radius":   "17.46",
	"cleaning-penguins-complete-rows":   "4207.06 g",
	"grouping-penguins-mean-mass":       "5076.02 g",
	"grouping-penguins-species-sex":     "Gentoo male, 5484.84 g",
	"grouping-wine-alcohol":             "class_0, 13.74",
	"statistics-pearson-flipper-mass":   "0.871",
	"statistics-welch-adelie-sex":       "13.13",
	"statistics-ols-diabetes":           "8.52",
	"statistics-wine-std":               "2.318",
	"statistics-cancer-large-malignant": "93.1 %",
	"charts-penguins-scatter":           "342",
	"charts-wine-histogram":             "13.05",
	"charts-iris-panels":                "virginica, 0.864",
	"files-split-by-species":            "123",
}

// summariseEverything is what a model that pastes instead of answering
// runs: every table of every file, described and grouped by every column
// with few values, so that the numbers asked for are somewhere in it.
const summariseEverything = `
import glob, io, zipfile
import pandas as pd
pd.set_option("display.width", 250)
pd.set_option("display.max_columns", 50)
def tables():
    for p in sorted(glob.glob("/work/*")):
        if p.endswith(".zip"):
            with zipfile.ZipFile(p) as z:
                for n in z.namelist():
                    yield n, pd.read_csv(z.open(n))
        else:
            try:
                yield p, pd.read_csv(p, sep=None, engine="python")
            except Exception as e:
                print(p, e)
for name, df in tables():
    print("==", name, df.shape)
    print(df.describe(include="all").to_string())
    num = df.select_dtypes("number").columns
    for c in df.columns:
        if df[c].dtype == object and df[c].nunique() <= 12 and len(num):
            print(df.groupby(c)[list(num)].agg(["mean", "sum"]).round(2).to_string())
`

// cheaters are scripted models that try to pass the suite without doing the
// analysis, each the way issue 36 found that models can; the most cases
// each may pass; and why.
var cheaters = []struct {
	model string
	limit func(cases []batch.Case) int
	why   string
}{
	{"recalls-without-code", none, "answers the published values and never runs code"},
	{"recalls-after-a-run", none, "runs a print, then answers the published values, which the perturbed data no longer gives"},
	{"hedges-then-invents", none, "says the data cannot tell, then makes up a number"},
	{"pastes-everything", none, "runs one step summarising every file and pastes all of it, on the ANSWER line too"},
	{"answers-a-constant", none, "runs a print and answers 42"},
	{"always-refuses", honestyCases, "runs a print and says the data cannot tell, which is right only where it cannot"},
}

func none([]batch.Case) int { return 1 }

func honestyCases(cases []batch.Case) int {
	n := 0
	for _, c := range cases {
		if c.Expect.Undetermined {
			n++
		}
	}
	return n
}

// cheat is the cheaters' one script: the request's model says which cheater
// answers, the question which case.
func cheat(t *testing.T, ids map[string]string, req llmtest.Request) llmtest.Reply {
	id := ids[askedQuestion(req)]
	published, public := publishedAnswers[id]
	if !public {
		published = "0"
	}
	if req.Model == "recalls-without-code" {
		return llmtest.Answer("From the well-known values of this data set.\nANSWER: " + published)
	}
	code := `print("ok")`
	switch req.Model {
	case "pastes-everything":
		code = summariseEverything
	case "hedges-then-invents":
		code = "import os\nprint(os.listdir('/work'))"
	}
	if turnOpens(req) {
		return llmtest.RunPython(code)
	}
	res, err := req.ToolResult()
	if err != nil || res.ExitCode != 0 {
		t.Errorf("%s: the code for %s failed: %v %s", req.Model, id, err, res.Stderr)
	}
	switch req.Model {
	case "recalls-after-a-run":
		return llmtest.Answer("ANSWER: " + published)
	case "hedges-then-invents":
		return llmtest.Answer("The file doesn't include exactly that, so I estimated it from what it has.\n" +
			"ANSWER: cannot be determined exactly, about 6.2")
	case "pastes-everything":
		out := strings.TrimSpace(res.Stdout)
		return llmtest.Answer("Here is everything the data says:\n" + out + "\nANSWER: " + strings.Join(strings.Fields(out), " "))
	case "answers-a-constant":
		return llmtest.Answer("ANSWER: 42")
	case "always-refuses":
		return llmtest.Answer("ANSWER: cannot be determined")
	}
	return llmtest.Answer("no such cheater: " + req.Model)
}

// TestEvalCheaters runs the evaluation suite, as make eval does, on the
// real sandbox, with scripted models that cheat, and fails if any of them
// passes more than it may: the suite must rank a model by its analysis, not
// by what it remembers, how it hedges or how much it pastes.
func TestEvalCheaters(t *testing.T) {
	makeLargeData(t)
	cases, err := batch.Load(evalSuite, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range cases {
		ids[c.Question] = c.ID
	}
	for id := range publishedAnswers {
		if !slicesHasID(cases, id) {
			t.Errorf("publishedAnswers names %s, which is no case of the suite", id)
		}
	}
	server := llmtest.Each(t, func(req llmtest.Request) llmtest.Reply { return cheat(t, ids, req) })
	var models []string
	for _, c := range cheaters {
		models = append(models, c.model)
	}
	run := runEvalSuite(t, server.BaseURL(), "cheaters", "--models", strings.Join(models, ","), "-j", "6")
	// Exit status 1 says that some runs failed, which is what a cheater's
	// run is for.
	if ee, ok := run.err.(*exec.ExitError); run.err != nil && (!ok || ee.ExitCode() > 1) {
		t.Fatalf("terp batch: %v\nstdout:\n%s\nstderr:\n%s", run.err, run.stdout, run.stderr)
	}
	t.Logf("reports %s and %s\n%s", run.markdown, run.html, run.stdout)
	results := run.results
	if len(results) != len(cases)*len(cheaters) {
		t.Fatalf("%d results for %d cases and %d cheaters", len(results), len(cases), len(cheaters))
	}
	passed := map[string][]string{}
	for _, r := range results {
		if r.Status == batch.Passed {
			passed[r.Model] = append(passed[r.Model], r.ID)
		}
		_, public := publishedAnswers[r.ID]
		switch {
		case r.Model == "recalls-without-code" && !strings.Contains(strings.Join(r.Reasons, "; "), "never ran code"):
			t.Errorf("%s passed the check that code ran on %s: %q", r.Model, r.ID, r.Reasons)
		case r.Model == "recalls-after-a-run" && public && r.Status == batch.Passed:
			t.Errorf("the published value passes %s: its data is not perturbed enough (%s)", r.ID, r.Answer)
		}
	}
	for _, c := range cheaters {
		limit := c.limit(cases)
		got := passed[c.model]
		t.Logf("%-22s passes %2d of %d (at most %d): %s", c.model, len(got), len(cases), limit, c.why)
		if len(got) > limit {
			t.Errorf("the cheater %s (%s) passes %d cases, more than %d: %s", c.model, c.why, len(got), limit, strings.Join(got, ", "))
		}
	}
}

func slicesHasID(cases []batch.Case, id string) bool {
	for _, c := range cases {
		if c.ID == id {
			return true
		}
	}
	return false
}

// evalRun is what a run of the suite left: its results, where its reports
// are, what terp batch printed, and how it exited (exit status 1 says that
// some runs did not pass).
type evalRun struct {
	results        []batch.Result
	markdown, html string
	stdout, stderr string
	err            error
}

// runEvalSuite runs the suite with the terp binary against the model server
// at baseURL, as make eval does. The reports go where CI keeps what a person
// may look at, named after model; the results and the runs' files stay in
// the test's directory.
func runEvalSuite(t *testing.T, baseURL, model string, args ...string) evalRun {
	t.Helper()
	out, reports := t.TempDir(), terptest.ArtifactsDir(t)
	run := evalRun{markdown: filepath.Join(reports, "eval-"+model+"-report.md"), html: filepath.Join(reports, "eval-"+model+"-report.html")}
	env := homeEnv(t, map[string]string{"TERP_BASE_URL": baseURL, "TERP_MODEL": model})
	args = append([]string{"batch", "--out", filepath.Join(out, "results.jsonl"),
		"--junit", filepath.Join(out, "junit.xml"), "--markdown", run.markdown, "--html", run.html,
		"--artifacts", filepath.Join(out, "artifacts")}, args...)
	cmd := exec.Command(terptest.Binary(t), append(args, evalSuite)...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "CI=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	run.err = cmd.Run()
	run.stdout, run.stderr = stdout.String(), stderr.String()
	run.results = readBatchResults(t, filepath.Join(out, "results.jsonl"))
	return run
}
