package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// terp serve --log-format json writes every line of its log as JSON, each
// request's with the request id the client sent and the key's name, never
// the key; --metrics-listen serves the metrics, with the model client's
// requests timed, and the probes, without a key.
func TestServeJSONLogsAndMetricsListener(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	s := llmtest.New(t, llmtest.Fixed(llmtest.RunPython("print(6 * 7)")), answerFromTool(t))
	env := serverEnv(s)
	env["TERP_SERVE_KEY"] = key
	g := startGateway(t, env, "--log-format", "json", "--metrics-listen", "127.0.0.1:0")
	m := regexp.MustCompile(`serving metrics on (http://\S+)/metrics`).FindStringSubmatch(g.log.String())
	if m == nil {
		t.Fatalf("terp serve did not say where the metrics are:\n%s", g.log)
	}
	ops := m[1]

	body := `{"model": "test-model", "input": "Six times seven?", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}`
	req, _ := http.NewRequest("POST", g.base+"/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "cli-test-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Request-Id") != "cli-test-1" {
		t.Fatalf("%s, X-Request-Id %q\n%s", resp.Status, resp.Header.Get("X-Request-Id"), g.log)
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, metrics := get(ops + "/metrics")
	for _, want := range []string{
		`terp_http_requests_total{code="200",route="POST /v1/responses"} 1`,
		`terp_upstream_request_duration_seconds_count{code="200",endpoint="chat/completions"} 2`,
		`terp_code_runs_total{result="ok"} 1`,
		`terp_tokens_total{direction="input",key_name="default"}`,
	} {
		if code != http.StatusOK || !strings.Contains(metrics, want) {
			t.Errorf("GET /metrics (%d) lacks %s", code, want)
		}
	}
	if code, ready := get(ops + "/readyz"); code != http.StatusOK || !strings.Contains(ready, `"name":"sandbox","status":"ok"`) {
		t.Errorf("GET /readyz: %d %s", code, ready)
	}

	if code := g.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, g.log)
	}
	var request map[string]any
	for line := range strings.Lines(g.log.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		if rec["msg"] == "request" && rec["route"] == "POST /v1/responses" {
			request = rec
		}
	}
	if request["request_id"] != "cli-test-1" || request["key_name"] != "default" || request["status"] != float64(200) || request["method"] != "POST" {
		t.Errorf("the request's line is %v", request)
	}
	if strings.Contains(g.log.String(), key) {
		t.Errorf("the log holds the key:\n%s", g.log)
	}
}

// An unknown log format is refused before anything starts, naming the
// formats there are.
func TestServeRefusesAnUnknownLogFormat(t *testing.T) {
	r := terp(t, nil, "", "serve", "--no-auth", "--log-format", "xml")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--log-format is one of text, json") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
