package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/docker"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

func healthyModel(t *testing.T) map[string]string {
	s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply { return llmtest.RunPython("print(1234 * 5678)") })
	return serverEnv(s)
}

func TestDoctorDockerNoDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(terptest.TempDir(t), "no-daemon.sock"))
	rep, r := doctorJSON(t, healthyModel(t), "--sandbox", "docker")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	c := checkNamed(t, rep, "docker daemon")
	if c.Status != checkFail || !strings.Contains(c.Detail, "no-daemon.sock") || !strings.Contains(c.Fix, "DOCKER_HOST") {
		t.Errorf("docker daemon check: %+v", c)
	}
	for _, name := range []string{"docker image", "docker python", "sandbox"} {
		if c := checkNamed(t, rep, name); c.Status != checkSkip {
			t.Errorf("%s check: %+v, want skipped", name, c)
		}
	}
}

func TestDoctorDockerMissingImage(t *testing.T) {
	terptest.DockerImage(t)
	rep, _ := doctorJSON(t, healthyModel(t), "--sandbox", "docker", "--docker-image", "terp-no-such-image:never")
	if c := checkNamed(t, rep, "docker daemon"); c.Status != checkOK || !strings.Contains(c.Detail, "API version 1.") {
		t.Errorf("docker daemon check: %+v", c)
	}
	c := checkNamed(t, rep, "docker image")
	if c.Status != checkFail || !strings.Contains(c.Detail, "terp-no-such-image:never") ||
		!strings.Contains(c.Fix, "pip install numpy pandas matplotlib") || !strings.Contains(c.Fix, "make docker-test-image") {
		t.Errorf("docker image check: %+v", c)
	}
}

func TestDoctorDockerHealthy(t *testing.T) {
	img := terptest.DockerImage(t)
	env := healthyModel(t)
	env["TERP_DOCKER_IMAGE"] = img
	rep, r := doctorJSON(t, env, "--sandbox", "docker")
	if r.code != 0 {
		t.Errorf("exit %d\n%s", r.code, r.stdout)
	}
	for _, name := range []string{"docker daemon", "docker image", "docker python", "sandbox"} {
		if c := checkNamed(t, rep, name); c.Status != checkOK {
			t.Errorf("%s check: %+v", name, c)
		}
	}
	if c := checkNamed(t, rep, "sandbox"); !strings.Contains(c.Detail, "docker sandbox ran Python 3.") {
		t.Errorf("sandbox check: %+v", c)
	}
}

// TestAskOnDocker is the seed's question end to end on the Docker backend:
// the model's pandas code runs in a container, in kernel mode, and the chart
// it saves is downloaded.
func TestAskOnDocker(t *testing.T) {
	img := terptest.DockerImage(t)
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(growthCode)), answerFromTool(t))
	env := serverEnv(s)
	env["TERP_SANDBOX"] = "docker"
	env["TERP_DOCKER_IMAGE"] = img
	home := terptest.TempDir(t)
	env["HOME"], env["XDG_DATA_HOME"], env["XDG_CONFIG_HOME"] = home, filepath.Join(home, "data"), filepath.Join(home, "config")
	out := filepath.Join(terptest.TempDir(t), "out")
	r := terp(t, env, "", "ask", "--json", "-o", out, "-f", salesCSV(t), "Which month grew the most?")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got askJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
	}
	// A failing test must not leave its container on the daemon either.
	t.Cleanup(func() { terp(t, env, "", "sessions", "rm", got.ConversationID) })
	if want := "The month that grew the most: 2025-12 26450"; got.Answer != want {
		t.Errorf("answer = %q, want %q", got.Answer, want)
	}
	if len(got.Files) != 1 || got.Files[0].SandboxPath != "/work/chart.png" {
		t.Errorf("files = %+v, want only /work/chart.png", got.Files)
	} else if png, err := os.ReadFile(got.Files[0].Path); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("downloaded chart at %s is not a PNG: %v", got.Files[0].Path, err)
	}

	// The conversation's container stays, paused, for --continue, until
	// the conversation is removed.
	st, err := store.Open(config.DataDir(func(k string) string { return env[k] }))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := st.Load(got.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := docker.New(docker.Config{Image: img})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if conv.Sandbox.Backend != "docker" || conv.Sandbox.SessionID == "" {
		t.Fatalf("the conversation's sandbox is %+v", conv.Sandbox)
	}
	if r := terp(t, env, "", "sessions", "rm", got.ConversationID); r.code != 0 {
		t.Fatalf("sessions rm: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := b.Resume(ctx, sandbox.SessionID(conv.Sandbox.SessionID)); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("after sessions rm, Resume of its sandbox: %v, want ErrExpired", err)
	}
}
