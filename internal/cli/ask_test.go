package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// result is what one terp invocation left for its user.
type result struct {
	code           int
	stdout, stderr string
}

// terp runs one command line the way the binary would, with env as the
// whole environment, a real local sandbox under a temporary data directory
// and stdin as given.
func terp(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return terpWith(t, nil, env, stdin, args...)
}

// terpWith is terp with the factory changed by seam first, as a test that
// injects a fault into the sandbox backend needs.
func terpWith(t *testing.T, seam func(*Factory), env map[string]string, stdin string, args ...string) result {
	t.Helper()
	full := homeEnv(t, env)
	var out, errOut bytes.Buffer
	f := NewFactory()
	f.IO = IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	f.Getenv = func(k string) string { return full[k] }
	if seam != nil {
		seam(f)
	}
	code := Run(context.Background(), f, args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// homeEnv is env over a new home and XDG directories of the test's own.
func homeEnv(t testing.TB, env map[string]string) map[string]string {
	home := terptest.TempDir(t)
	full := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
	}
	for k, v := range env {
		full[k] = v
	}
	return full
}

func serverEnv(s *llmtest.Server) map[string]string {
	return map[string]string{"TERP_BASE_URL": s.BaseURL(), "TERP_MODEL": "test-model"}
}

// salesCSV writes the example data set into a temporary directory.
func salesCSV(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/sales.csv")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(terptest.TempDir(t), "sales.csv")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const growthCode = `import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv("/work/sales.csv")
growth = df["revenue"].diff()
best = growth.idxmax()
df.plot(x="month", y="revenue")
plt.savefig("/work/chart.png")
print(df["month"][best], int(growth[best]))
`

// answerFromTool answers with what the code printed: if the tool path is
// broken, the answer is wrong.
func answerFromTool(t *testing.T) llmtest.Step {
	return func(req llmtest.Request) llmtest.Reply {
		res, err := req.ToolResult()
		if err != nil {
			t.Errorf("tool message is not terp's JSON: %v", err)
		}
		return llmtest.Answer("The month that grew the most: " + strings.TrimSpace(res.Stdout))
	}
}

func TestAskComputesTheAnswerInTheSandbox(t *testing.T) {
	for _, stream := range []string{"true", "false"} {
		t.Run("stream="+stream, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(growthCode)), answerFromTool(t))
			env := serverEnv(s)
			env["TERP_STREAM"] = stream
			out := filepath.Join(terptest.TempDir(t), "out")
			r := terp(t, env, "", "ask", "--json", "-o", out, "-f", salesCSV(t), "Which month grew the most?")
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			var got askJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
			}
			if want := "The month that grew the most: 2025-12 26450"; got.Answer != want {
				t.Errorf("answer = %q, want %q", got.Answer, want)
			}
			if got.StopReason != "answered" || got.Steps != 2 {
				t.Errorf("stop_reason %q after %d steps, want answered after 2", got.StopReason, got.Steps)
			}
			if got.Usage.TotalTokens != 220 {
				t.Errorf("usage = %+v, want 220 tokens over two requests", got.Usage)
			}
			if len(got.Files) != 1 || got.Files[0].SandboxPath != "/work/chart.png" {
				t.Fatalf("files = %+v, want only /work/chart.png", got.Files)
			}
			png, err := os.ReadFile(got.Files[0].Path)
			if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) || int64(len(png)) != got.Files[0].Bytes {
				t.Errorf("downloaded chart at %s is not the PNG reported (%d bytes): %v", got.Files[0].Path, len(png), err)
			}
			// The model was told where the data is.
			if sys := s.Requests()[0].Messages[0].Content; !strings.Contains(sys, "/work/sales.csv") {
				t.Errorf("system prompt does not list the upload:\n%s", sys)
			}
		})
	}
}

func TestAskPlainOutputListsFiles(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(growthCode)), answerFromTool(t))
	out := filepath.Join(terptest.TempDir(t), "out")
	r := terp(t, serverEnv(s), "", "ask", "-o", out, "-f", salesCSV(t), "Which month grew the most?")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	want := fmt.Sprintf("The month that grew the most: 2025-12 26450\n\nFiles:\n  %s (", filepath.Join(out, "chart.png"))
	if !strings.HasPrefix(r.stdout, want) {
		t.Errorf("stdout =\n%s\nwant it to start with\n%s", r.stdout, want)
	}
}

// A file one step saves and a later step removes is no download error: the
// answer stands, with a warning.
func TestAskSkipsAFileRemovedLater(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/tmp.csv', 'w').write('x')\nopen('/work/keep.csv', 'w').write('y')")),
		llmtest.Fixed(llmtest.RunPython("import os; os.remove('/work/tmp.csv')")),
		llmtest.Fixed(llmtest.Answer("done")))
	out := filepath.Join(terptest.TempDir(t), "out")
	r := terp(t, serverEnv(s), "", "ask", "--json", "-o", out, "tidy up")
	got := askJSONOf(t, r)
	if r.code != 0 || got.Answer != "done" || len(got.Files) != 1 || !strings.HasSuffix(got.Files[0].Path, "keep.csv") {
		t.Fatalf("exit %d, %+v, stderr:\n%s", r.code, got, r.stderr)
	}
	// --json says it in warnings, and only there.
	if w := strings.Join(got.Warnings, "\n"); !strings.Contains(w, "skipped /work/tmp.csv: it is not there") || strings.Contains(r.stderr, "skipped") {
		t.Errorf("the removed file is not warned of once, in the JSON: warnings %q, stderr:\n%s", got.Warnings, r.stderr)
	}
}

func TestAskReadsTheQuestionFromStdin(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("forty-two")))
	r := terp(t, serverEnv(s), "what is six times seven?\n", "ask")
	if r.code != 0 || r.stdout != "forty-two\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if q := s.Requests()[0].Messages[1].Content; q != "what is six times seven?" {
		t.Errorf("question sent = %q", q)
	}
}

func TestAskStepCap(t *testing.T) {
	loop := llmtest.Fixed(llmtest.RunPython("print('still going')"))
	s := llmtest.New(t, loop, loop)
	r := terp(t, serverEnv(s), "", "ask", "--json", "--max-steps", "2", "count forever")
	if r.code != exitMaxSteps {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitMaxSteps, r.stderr)
	}
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.StopReason != "max_steps" || got.Steps != 2 || !strings.Contains(got.Answer, "step cap") {
		t.Errorf("got %+v, want stop_reason max_steps after 2 steps and an answer naming the cap", got)
	}
}

// Without --json the step cap's message goes to stderr, worded for one
// step: stdout holds only answers.
func TestAskStepCapPlain(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print('still going')")))
	r := terp(t, serverEnv(s), "", "ask", "--max-steps", "1", "count forever")
	if r.code != exitMaxSteps || r.stdout != "" || !strings.Contains(r.stderr, "Stopped after 1 step without a final answer") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestAskRecoversFromInvalidArguments(t *testing.T) {
	bad := llmtest.Reply{Calls: []llmtest.Call{{Name: "run_python", Arguments: `{"code": "print(1)`}}}
	s := llmtest.New(t,
		llmtest.Fixed(bad),
		func(req llmtest.Request) llmtest.Reply {
			res, _ := req.ToolResult()
			if !strings.Contains(res.Error, "not valid JSON") {
				t.Errorf("the model was not told its arguments were invalid: %q", req.LastTool())
			}
			return llmtest.RunPython("print(6*7)")
		},
		answerFromTool(t))
	r := terp(t, serverEnv(s), "", "ask", "six times seven?")
	if r.code != 0 || !strings.Contains(r.stdout, "42") {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestAskBadInput(t *testing.T) {
	deadURL := "http://" + terptest.RefusedAddr(t) + "/v1"

	brokenConfig := filepath.Join(terptest.TempDir(t), "config.toml")
	if err := os.WriteFile(brokenConfig, []byte("model = \"x\"\nmax_steps = \"ten\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		stderrs []string
	}{
		{
			name:    "missing upload",
			args:    []string{"ask", "-f", "/nonexistent/sales.csv", "q"},
			code:    exitUsage,
			stderrs: []string{"/nonexistent/sales.csv", "no such file"},
		},
		{
			name:    "broken config",
			args:    []string{"--config", brokenConfig, "ask", "q"},
			code:    exitUsage,
			stderrs: []string{"config.toml:2", "max_steps"},
		},
		{
			name:    "unknown flag",
			args:    []string{"ask", "--max-stesp", "3", "q"},
			code:    exitUsage,
			stderrs: []string{"--max-stesp"},
		},
		{
			name:    "bad flag value",
			args:    []string{"ask", "--timeout", "soon", "q"},
			code:    exitUsage,
			stderrs: []string{"--timeout"},
		},
		{
			name:    "unknown command",
			args:    []string{"aks", "q"},
			code:    exitUsage,
			stderrs: []string{`unknown command "aks"`},
		},
		{
			name:    "missing argument",
			args:    []string{"sessions", "show"},
			code:    exitUsage,
			stderrs: []string{"accepts 1 arg(s), received 0", "terp sessions show --help"},
		},
		{
			name:    "extra argument",
			args:    []string{"version", "now"},
			code:    exitUsage,
			stderrs: []string{`"now"`, "terp version --help"},
		},
		{
			name:    "unreachable endpoint",
			env:     map[string]string{"TERP_BASE_URL": deadURL},
			args:    []string{"ask", "q"},
			code:    exitError,
			stderrs: []string{strings.TrimSuffix(strings.TrimPrefix(deadURL, "http://"), "/v1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := terp(t, tt.env, "", tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, tt.code, r.stderr)
			}
			for _, want := range tt.stderrs {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}

func TestAskUnauthorizedNamesTheVariable(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Status: 401, Body: `{"error":{"message":"Invalid API key","type":"invalid_request_error"}}`}))
	r := terp(t, serverEnv(s), "", "ask", "q")
	if r.code != exitError {
		t.Fatalf("exit %d, want %d", r.code, exitError)
	}
	for _, want := range []string{"TERP_API_KEY", "GPUOS_API_KEY"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not name %s:\n%s", want, r.stderr)
		}
	}
}

func TestAskJSONReportsErrorsAsAnObject(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Reply{Status: 401, Body: `{"error":"unauthorized"}`}))
	r := terp(t, serverEnv(s), "", "ask", "--json", "q")
	if r.code != exitError {
		t.Fatalf("exit %d, want %d", r.code, exitError)
	}
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	if got.StopReason != "error" || !strings.Contains(got.Error, "API key") || got.Files == nil {
		t.Errorf("got %+v, want stop_reason error, the cause, and files as []", got)
	}
}

func TestAskRetriesAServerError(t *testing.T) {
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.Reply{Status: 500, Body: `{"error":{"message":"CUDA error: an illegal memory access was encountered"}}`}),
		llmtest.Fixed(llmtest.Answer("fine now")))
	r := terp(t, serverEnv(s), "", "ask", "q")
	if r.code != 0 || r.stdout != "fine now\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
}

func TestAPIKeyNeverEntersTheSandbox(t *testing.T) {
	const secret = "sk-terp-test-secret-0123456789"
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(`import os
print(sorted(os.environ))
print(open("/proc/self/environ","rb").read().count(b"sk-terp"))`)),
		func(req llmtest.Request) llmtest.Reply {
			if strings.Contains(req.LastTool(), "sk-terp") || strings.Contains(req.LastTool(), "GPUOS") {
				t.Errorf("the sandbox saw the API key: %s", req.LastTool())
			}
			return llmtest.Answer("ok")
		})
	env := serverEnv(s)
	env["GPUOS_API_KEY"] = secret
	r := terp(t, env, "", "ask", "q")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Error("the key was printed")
	}
}

func TestConfigShowSaysWhereValuesCameFrom(t *testing.T) {
	dir := terptest.TempDir(t)
	path := filepath.Join(dir, "terp.toml")
	if err := os.WriteFile(path, []byte("# mine\nmodel = \"from-file\"\nmax_steps = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := terp(t, map[string]string{"TERP_MAX_STEPS": "6", "GPUOS_API_KEY": "sk-abcdefghijklmnop1234"}, "",
		"--config", path, "config", "show")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"from-file", path + ":2", "env TERP_MAX_STEPS", "sk-a…1234"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config show does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "sk-abcdefghijklmnop1234") {
		t.Error("config show printed the whole key")
	}
}

// config show prints the prompt a new conversation sends, in the wording
// of the model's family, and the prompt key names another family.
func TestConfigShowPrintsThePrompt(t *testing.T) {
	r := terp(t, map[string]string{"TERP_MODEL": "openai/gpt-oss-20b", "TERP_TIMEOUT": "90s"}, "", "config", "show")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"prompt for openai/gpt-oss-20b (wording gpt-oss)", "Files are in /mnt/data (empty for now).",
		"stateful Jupyter notebook environment", "time out after 90.0 seconds", `prompt = "gpt-oss"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config show does not say %q:\n%s", want, r.stdout)
		}
	}
	r = terp(t, map[string]string{"TERP_MODEL": "my-finetune", "TERP_PROMPT": "qwen3"}, "", "config", "show", "--json")
	var report struct {
		Prompt struct{ Wording, System, Tool string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || report.Prompt.Wording != "qwen3" ||
		!strings.HasPrefix(report.Prompt.Tool, "Python code sandbox") || !strings.Contains(report.Prompt.System, "/work") {
		t.Errorf("config show --json: %v %+v\n%s", err, report, r.stdout)
	}
	if r := terp(t, map[string]string{"TERP_PROMPT": "chatgpt"}, "", "config", "show"); r.code != exitUsage || !strings.Contains(r.stderr, "gpt-oss") {
		t.Errorf("an unknown prompt: exit %d, stderr %q; want a usage error naming the choices", r.code, r.stderr)
	}
}

func TestConfigInitWritesALoadableFile(t *testing.T) {
	path := filepath.Join(terptest.TempDir(t), "c", "config.toml")
	if r := terp(t, nil, "", "--config", path, "config", "init"); r.code != 0 {
		t.Fatalf("init: exit %d: %s", r.code, r.stderr)
	}
	if r := terp(t, nil, "", "--config", path, "config", "init"); r.code != exitUsage || !strings.Contains(r.stderr, "--force") {
		t.Errorf("second init: exit %d, stderr %q; want a refusal naming --force", r.code, r.stderr)
	}
	if _, err := config.Load(config.LoadOptions{Path: path, Getenv: func(string) string { return "" }}); err != nil {
		t.Errorf("the written template does not load: %v", err)
	}
}

func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	for _, args := range [][]string{{"ask"}, {"config"}, {"config", "init"}, {"config", "show"}, {"config", "path"}, {"version"}} {
		r := terp(t, nil, "", append(args, "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("terp %s --help: exit %d, no examples:\n%s", strings.Join(args, " "), r.code, r.stdout)
		}
	}
}

// TestInterruptKeepsWhatWasSaved sends SIGINT to a real terp process while
// the code runs: terp stops the run, still downloads what earlier steps
// saved, reports the turn as cancelled and exits 130.
func TestInterruptKeepsWhatWasSaved(t *testing.T) {
	bin := terptest.Binary(t)
	started := make(chan struct{})
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython("open('/work/partial.txt', 'w').write('kept')")),
		func(llmtest.Request) llmtest.Reply {
			close(started)
			return llmtest.RunPython("import time\ntime.sleep(300)")
		})
	dir := terptest.TempDir(t)
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "ask", "--json", "-o", out, "work slowly")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "TERP_BASE_URL=" + s.BaseURL()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the second step never started")
	}
	time.Sleep(500 * time.Millisecond) // let the sleeping code start
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, exitInterrupted, stderr.String())
	}
	var got askJSON
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if got.StopReason != "cancelled" {
		t.Errorf("stop_reason = %q, want cancelled", got.StopReason)
	}
	if b, err := os.ReadFile(filepath.Join(out, "partial.txt")); err != nil || string(b) != "kept" {
		t.Errorf("the file saved before the interrupt was not downloaded: %q, %v", b, err)
	}
	wantPausedConversations(t, filepath.Join(dir, "data", "terp"))
}

// wantPausedConversations checks that terp left nothing running: every
// sandbox under dataDir is paused and belongs to a stored conversation,
// which can resume it.
func wantPausedConversations(t *testing.T, dataDir string) {
	t.Helper()
	st, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, e := range entries {
		if e.Err != nil {
			t.Errorf("conversation %s: %v", e.ID, e.Err)
			continue
		}
		owned[e.Conversation.Sandbox.SessionID] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "[0-9a-f]*"))
	for _, d := range dirs {
		var meta struct{ Paused bool }
		b, err := os.ReadFile(filepath.Join(d, "sandbox.json"))
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		if err != nil || !meta.Paused || !owned[filepath.Base(d)] {
			t.Errorf("sandbox %s left behind: paused %v, owned by a conversation %v (%v)", d, meta.Paused, owned[filepath.Base(d)], err)
		}
	}
}

// A second run into the same -o directory, and a later turn that saves the
// same name again, keep the files already there: the new one gets a
// numbered name, reported in the JSON and in a note on stderr.
func TestAskOutNeverOverwrites(t *testing.T) {
	env, _ := sharedEnv(t, nil)
	out := filepath.Join(terptest.TempDir(t), "out")
	save := func(text string, more ...string) askJSON {
		t.Helper()
		s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(fmt.Sprintf("open('/work/chart.png', 'w').write(%q)", text))), llmtest.Fixed(llmtest.Answer("saved")))
		for k, v := range serverEnv(s) {
			env[k] = v
		}
		r := terp(t, env, "", append(append([]string{"ask", "--json", "-o", out}, more...), "save it")...)
		got := askJSONOf(t, r)
		if r.code != 0 || len(got.Files) != 1 {
			t.Fatalf("exit %d, %+v, stderr:\n%s", r.code, got, r.stderr)
		}
		if b, _ := os.ReadFile(got.Files[0].Path); string(b) != text {
			t.Errorf("%s holds %q, want %q", got.Files[0].Path, b, text)
		}
		if first := filepath.Join(out, "chart.png"); got.Files[0].Path != first && !strings.Contains(strings.Join(got.Warnings, "\n"), first+" was already there and is kept") {
			t.Errorf("no warning that %s was kept: %q", first, got.Warnings)
		}
		return got
	}
	// Two runs, then a later turn of the second.
	paths := []string{save("first").Files[0].Path, save("second").Files[0].Path, save("third", "--continue").Files[0].Path}
	want := []string{filepath.Join(out, "chart.png"), filepath.Join(out, "chart-1.png"), filepath.Join(out, "chart-2.png")}
	if !slices.Equal(paths, want) {
		t.Errorf("the three turns saved to %q, want %q", paths, want)
	}
	if b, _ := os.ReadFile(want[0]); string(b) != "first" {
		t.Errorf("the first chart now holds %q", b)
	}
}

// A server error that outlasts the retries is told once, as the command
// ends, however many times it was retried.
func TestAskServerErrorPrintedOnce(t *testing.T) {
	const msg = "CUDA error: an illegal memory access was encountered"
	var steps []llmtest.Step
	for range 10 {
		steps = append(steps, llmtest.Fixed(llmtest.Reply{Status: 500, Body: `{"error":{"message":"` + msg + `"}}`}))
	}
	s := llmtest.New(t, steps...)
	r := terp(t, serverEnv(s), "", "ask", "q")
	if r.code != exitError || strings.Count(r.stderr, msg) != 1 || len(s.Requests()) < 2 {
		t.Errorf("exit %d after %d requests; want exit 1 and the error once:\n%s", r.code, len(s.Requests()), r.stderr)
	}
}
