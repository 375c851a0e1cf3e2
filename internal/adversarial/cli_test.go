package adversarial

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/terpdev/terp/internal/cli"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// These cases run terp end to end, in process, against a scripted model
// (llmtest) and the real local sandbox: after the hostile step, the next
// step of the same conversation must work and terp must finish normally.

type askResult struct {
	code           int
	stdout, stderr string
}

// ask runs `terp ask` with a fresh data directory, the scripted model and
// the given extra environment. Stderr is treated as a terminal, so the plain
// progress (code, output excerpts) is printed too.
func ask(t *testing.T, s *llmtest.Server, env map[string]string, args ...string) askResult {
	t.Helper()
	home := terptest.TempDir(t)
	full := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
		"TERP_BASE_URL":   s.BaseURL(),
		"TERP_MODEL":      "test-model",
		"TERP_API_KEY":    host.apiKey,
		"TERP_TIMEOUT":    "5s",
	}
	for k, v := range env {
		full[k] = v
	}
	var out, errOut bytes.Buffer
	f := cli.NewFactory()
	f.IO = cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, StderrTTY: true}
	f.Getenv = func(k string) string { return full[k] }
	// No prewarm: the hostile steps run under short timeouts, and a cell
	// that imports sys waits for the prewarm's imports, which on a machine
	// as loaded as CI's can outlast them. The prewarm has tests of its own.
	code := cli.Run(context.Background(), f, append([]string{"ask", "--prewarm="}, args...))
	return askResult{code: code, stdout: out.String(), stderr: errOut.String()}
}

// thenRun is a step that checks the previous tool result with check and then
// runs code.
func thenRun(check func(llmtest.Request), code string) llmtest.Step {
	return func(req llmtest.Request) llmtest.Reply {
		check(req)
		return llmtest.RunPython(code)
	}
}

// answerIfAlive answers "alive" only if the last step printed "alive": the
// conversation kept working after the hostile step.
func answerIfAlive(t *testing.T) llmtest.Step {
	return func(req llmtest.Request) llmtest.Reply {
		res, err := req.ToolResult()
		if err != nil || strings.TrimSpace(res.Stdout) != "alive" {
			t.Errorf("the step after the hostile one did not work: %+v %v", res, err)
			return llmtest.Answer("broken")
		}
		return llmtest.Answer("alive")
	}
}

const aliveCode = "print('alive')"

func TestAskEscapeSequences(t *testing.T) {
	t.Parallel()
	code := `import sys
evil = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b]52;c;ZXZpbA==\x07\u202eblue\x9b1m"
print(evil); print(evil, file=sys.stderr)
open("/work/\x1b[31mevil.txt", "w").write("x")
`
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(code)),
		llmtest.Fixed(llmtest.RunPython(aliveCode)),
		func(req llmtest.Request) llmtest.Reply {
			answerIfAlive(t)(req)
			return llmtest.Answer("done \x1b]52;c;ZXZpbA==\x07 \x1b[2J\u202e")
		})
	r := ask(t, s, nil, "-o", terptest.TempDir(t), "print something")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for name, b := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u009b"} {
			if strings.Contains(b, bad) {
				t.Errorf("%s passes %q through:\n%q", name, bad, b)
			}
		}
	}
	// The model's answer is shown with its escapes made visible; the
	// code's output reaches the model, and so the progress, as a terminal
	// would have left it, its sequences gone and the rest neutralized.
	if !strings.Contains(r.stdout, "done ^[]52") || !strings.Contains(r.stderr, "│ red\ufffdblue1m") {
		t.Errorf("the neutralized text is not shown:\nstdout %q\nstderr %q", r.stdout, r.stderr)
	}
}

func TestAskBinaryOutput(t *testing.T) {
	t.Parallel()
	code := `import os, sys
sys.stdout.buffer.write(os.urandom(8192) + b"\xff\xfe\xc3(\x00\xed\xa0\x80")
sys.stderr.buffer.write(b"\xc0\xaf" + os.urandom(4096))
`
	valid := func(req llmtest.Request) {
		raw := req.LastTool()
		if !utf8.ValidString(raw) || !json.Valid([]byte(raw)) {
			t.Errorf("the tool result is not valid UTF-8 JSON: %q", raw[:min(len(raw), 200)])
		}
		if _, err := req.ToolResult(); err != nil {
			t.Errorf("tool result: %v", err)
		}
	}
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(code)),
		thenRun(valid, aliveCode),
		answerIfAlive(t))
	r := ask(t, s, nil, "print bytes")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "alive" {
		t.Errorf("exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	if !utf8.ValidString(r.stderr) {
		t.Errorf("the progress is not valid UTF-8")
	}
}

// TestAskSurvivesHostileSteps runs, in one conversation, code that hangs,
// kills everything it can see, leaves a daemon, forks without end and reads
// the environment; each next step must work.
func TestAskSurvivesHostileSteps(t *testing.T) {
	t.Parallel()
	hostile := []string{
		"while True:\n    pass\n",
		"import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n",
		"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)\n",
		"import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(60); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)\n",
		"import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\nprint(open('/proc/1/environ', 'rb').read())\n",
	}
	var steps []llmtest.Step
	noKey := func(req llmtest.Request) {
		if strings.Contains(req.LastTool(), host.apiKey) || strings.Contains(req.LastTool(), "API_KEY") {
			t.Errorf("a tool result holds the API key: %s", req.LastTool())
		}
	}
	for i, code := range hostile {
		if i == 0 {
			steps = append(steps, llmtest.Fixed(llmtest.RunPython(code)))
		} else {
			steps = append(steps, thenRun(func(req llmtest.Request) {
				if res, _ := req.ToolResult(); strings.TrimSpace(res.Stdout) != "alive" {
					t.Errorf("after hostile step %d the next step printed %q (%s)", i-1, res.Stdout, res.Note)
				}
			}, code))
		}
		steps = append(steps, thenRun(noKey, aliveCode))
	}
	steps = append(steps, answerIfAlive(t))
	srv := model(t, steps...)
	r := ask(t, srv, map[string]string{
		"TERP_MAX_STEPS":     "20",
		"TERP_PROCESS_LIMIT": "64",
		"TERP_TIMEOUT":       "3s",
	}, "be hostile")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "alive" {
		t.Fatalf("exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	for i, req := range srv.Requests()[1:] {
		if res, err := req.ToolResult(); err == nil && i%2 == 0 {
			t.Logf("hostile step %d: exit %d, timed out %v, note %q", i/2, res.ExitCode, res.TimedOut, clip(res.Note))
		}
	}
}

// model starts a scripted model server.
func model(t *testing.T, steps ...llmtest.Step) *llmtest.Server { return llmtest.New(t, steps...) }

// TestAskDownloadTricks plants symlinks, a FIFO and a file over
// max_download_size; terp downloads only the honest file and says why it
// skipped the big one.
func TestAskDownloadTricks(t *testing.T) {
	t.Parallel()
	code := strings.Replace(plantLinks, "%q", `"`+host.tmpSecret+`"`, 1)
	srv := model(t,
		llmtest.Fixed(llmtest.RunPython(code)),
		llmtest.Fixed(llmtest.RunPython(aliveCode)),
		answerIfAlive(t))
	out := terptest.TempDir(t)
	r := ask(t, srv, map[string]string{"TERP_MAX_DOWNLOAD_SIZE": "1MiB"}, "-o", out, "save files")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "skipped /work/big.bin") {
		t.Errorf("no warning about the big file:\n%s", r.stderr)
	}
	var got []string
	_ = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != out {
			rel, _ := filepath.Rel(out, p)
			got = append(got, rel)
			if b, err := os.ReadFile(p); err == nil && (hasSecret(string(b)) || bytes.Contains(b, []byte("root:"))) {
				t.Errorf("downloaded %s holds a host file", rel)
			}
		}
		return nil
	})
	if strings.Join(got, ",") != "fine.txt" {
		t.Errorf("downloaded %v, want only fine.txt", got)
	}
}

// TestSignalsToTerp runs the real binary as a subprocess and has the code
// send SIGKILL to every pid it can name: its parents, the sandbox's init,
// -1, and terp's own host pid. terp must survive and finish the
// conversation.
func TestSignalsToTerp(t *testing.T) {
	t.Parallel()
	bin := terptest.Binary(t)
	var terpPid atomic.Int64
	srv := model(t,
		func(llmtest.Request) llmtest.Reply {
			return llmtest.RunPython(fmt.Sprintf(`import os, signal
tried = []
for pid in [os.getppid(), 1, %d] + list(range(2, 300)):
    try:
        os.kill(pid, signal.SIGKILL); tried.append(pid)
    except OSError:
        pass
os.kill(-1, signal.SIGKILL)
`, terpPid.Load()))
		},
		llmtest.Fixed(llmtest.RunPython(aliveCode)),
		answerIfAlive(t))
	home := terptest.TempDir(t)
	cmd := exec.Command(bin, "ask", "--exec-mode", "script", "kill terp")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"TERP_BASE_URL=" + srv.BaseURL(),
		"TERP_MODEL=test-model",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	terpPid.Store(int64(cmd.Process.Pid))
	err := cmd.Wait()
	if err != nil || strings.TrimSpace(out.String()) != "alive" {
		t.Errorf("terp: %v, stdout %q\nstderr:\n%s", err, out.String(), errOut.String())
	}
}
