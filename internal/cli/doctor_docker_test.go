package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox/docker"
)

func healthyModel(t *testing.T) map[string]string {
	s := llmtest.New(t, func(req llmtest.Request) llmtest.Reply { return llmtest.RunPython("print(1234 * 5678)") })
	return serverEnv(s)
}

// dockerTestImage is the image `make docker-test-image` builds; the test
// skips, loudly, without a daemon or without the image.
func dockerTestImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("TERP_TEST_DOCKER_IMAGE")
	if img == "" {
		img = "terp-python:debian12"
	}
	b, err := docker.New(docker.Config{Image: img})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := ""
	if _, err := b.Ping(ctx); err != nil {
		msg = fmt.Sprintf("DOCKER TESTS SKIPPED: no daemon at %s: %v", b.Host(), err)
	} else if b.InspectImage(ctx) != nil {
		msg = fmt.Sprintf("DOCKER TESTS SKIPPED: the test image %s is missing; run `make docker-test-image`", img)
	}
	if msg != "" {
		fmt.Fprintln(os.Stderr, "\n*** "+msg+" ***")
		t.Skip(msg)
	}
	return img
}

func TestDoctorDockerNoDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-daemon.sock"))
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
	dockerTestImage(t)
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
	img := dockerTestImage(t)
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
