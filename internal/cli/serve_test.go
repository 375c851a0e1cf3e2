package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// terp serve refuses to start unsafely, saying what to do: without keys,
// with --no-auth off loopback, with a keys file it cannot use.
func TestServeRefusesToStartUnsafely(t *testing.T) {
	dir := terptest.TempDir(t)
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("# keys\nalice sk-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(dir, "twice")
	if err := os.WriteFile(twice, []byte("alice 0123456789abcdef0\nbob 0123456789abcdef0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no keys", []string{"serve"}, "set TERP_SERVE_KEY, give --keys-file PATH, or --no-auth"},
		{"no-auth off loopback", []string{"serve", "--no-auth", "--listen", "0.0.0.0:8080"}, "allowed on a loopback address only"},
		{"short key", []string{"serve", "--keys-file", short}, short + ":2: the key of alice is shorter than 16 characters"},
		{"shared key", []string{"serve", "--keys-file", twice}, twice + ":2: bob has the key of alice"},
		{"missing keys file", []string{"serve", "--keys-file", filepath.Join(dir, "nope")}, "cannot read the keys file"},
		{"both", []string{"serve", "--keys-file", short, "--no-auth"}, "contradict"},
		{"public url without a scheme", []string{"serve", "--no-auth", "--public-url", "terp.example.com"}, "give http(s)://HOST"},
		{"public url with a query", []string{"serve", "--no-auth", "--public-url", "https://terp.example.com/?a=1"}, "give http(s)://HOST"},
		{"link lifetime too short", []string{"serve", "--no-auth", "--link-lifetime", "1s"}, "give a minute or more"},
		{"warm below zero", []string{"serve", "--no-auth", "--warm", "-1"}, "--warm is -1: give between 0 (none) and 64"},
		{"warm past the bound", []string{"serve", "--no-auth", "--warm", "65"}, "--warm is 65: give between 0 (none) and 64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := terp(t, nil, "", tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 saying %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// lockedBuffer is a buffer the server's log writes to while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// terp serve, as a user starts it, answers a Responses request with a code
// interpreter on the real local sandbox, and on Ctrl+C stops and keeps the
// container's conversation for terp sessions.
func TestServeAnswersAndStops(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(sum(range(101)))")), answerFromTool(t))
	env := serverEnv(s)
	env["TERP_SERVE_KEY"] = key
	g := startGateway(t, env)
	body := `{"model": "test-model", "input": "Sum 0..100.", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}`
	req, _ := http.NewRequest("POST", g.base+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || got.Status != "completed" {
		t.Fatalf("%d %+v %v\n%s", resp.StatusCode, got, err, g.log)
	}
	last := got.Output[len(got.Output)-1]
	if last.Type != "message" || !strings.Contains(last.Content[0].Text, "5050") {
		t.Errorf("the answer is %+v; want one computed by the code (5050)", last)
	}
	if code := g.stop(); code != 0 || !strings.Contains(g.log.String(), "the containers are paused") {
		t.Errorf("after Ctrl+C: exit %d\n%s", code, g.log)
	}
	ls := terpWith(t, nil, g.env, "", "sessions", "ls", "--json")
	if ls.code != 0 || !strings.Contains(ls.stdout, `"origin": "serve"`) && !strings.Contains(ls.stdout, `"origin":"serve"`) {
		t.Errorf("the container's conversation is not kept: exit %d\n%s%s", ls.code, ls.stdout, ls.stderr)
	}
}

// On SIGTERM (here, its context ending) terp serve first drains: /readyz
// answers 503 "stopping" while new requests are still served, for
// --shutdown-delay; then the listener closes.
func TestServeDrains(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	env := serverEnv(llmtest.New(t))
	env["TERP_SERVE_KEY"] = key
	g := startGateway(t, env, "--shutdown-delay", "3s")
	get := func(path string) (int, string, error) {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(g.base, "/v1")+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	stopped := make(chan int, 1)
	go func() { stopped <- g.stop() }()
	deadline := time.Now().Add(3 * time.Second)
	for {
		status, body, err := get("/readyz")
		if err == nil && status == http.StatusServiceUnavailable && strings.Contains(body, `"stopping"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said the server is stopping: %d %s %v\n%s", status, body, err, g.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, body, err := get("/v1/files"); err != nil || status != http.StatusOK {
		t.Errorf("a new request while draining: %d %s %v; want it served", status, body, err)
	}
	if code := <-stopped; code != 0 || !strings.Contains(g.log.String(), "stopping: /readyz answers 503") {
		t.Errorf("exit %d\n%s", code, g.log)
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Error("the listener still answers after the drain and the stop")
	}
}
