package openaiapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// pythonClients is the script of apps written with OpenAI's Python SDKs.
const pythonClients = "../../../testdata/python/openai_clients.py"

// The versions of the Python SDKs the test installs from PyPI.
const (
	pythonOpenAI = "openai==3.60.0"
	pythonAgents = "openai-agents==0.24.0"
)

// Apps written with OpenAI's Python SDKs run against terp serve unchanged:
// the openai SDK as docs/serve.md shows it (an upload the code reads, a
// stream, containers, chat completions with the alias model), and the
// Agents SDK with its CodeInterpreterTool, and with a function tool of its
// own, which terp serve answers as an adapter with no container.
func TestPythonSDKs(t *testing.T) {
	python := terptest.PythonVenv(t, pythonOpenAI+" "+pythonAgents)
	if _, err := os.ReadFile(pythonClients); err != nil { // for go test's cache
		t.Fatal(err)
	}
	ts := newTestServer(t, llmtest.New(t, slices.Repeat([]llmtest.Step{clientModel(t)}, 16)...))
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, python, pythonClients, ts.URL+"/v1", aliceKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", pythonClients, err, stdout.String(), stderr.String())
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("the script printed %q: %v", sc.Text(), err)
		}
		got[r["flow"].(string)] = r
	}
	check := func(flow, field, want string) {
		t.Helper()
		if v := got[flow][field]; v != want {
			t.Errorf("%s: %s = %v; want %q", flow, field, v, want)
		}
	}
	check("files", "status", "completed")
	check("files", "output_text", "Total revenue: 350")
	check("files", "logs", "350\n")
	check("stream", "text", "It is 1024")
	check("stream", "completed_status", "completed")
	if types, _ := got["stream"]["types"].([]any); len(types) == 0 || types[len(types)-1] != "response.completed" ||
		!slices.Contains(types, any("response.code_interpreter_call_code.delta")) {
		t.Errorf("stream events %v", types)
	}
	check("containers", "name", "python-sdk")
	check("containers", "content", "kept")
	if got["containers"]["gone"] != true || !slices.Contains(got["containers"]["listed"].([]any), any("/mnt/data/notes.txt")) {
		t.Errorf("containers: %v", got["containers"])
	}
	if content, _ := got["chat"]["content"].(string); !strings.HasSuffix(content, "Chat says 42") || !strings.HasPrefix(got["chat"]["container"].(string), "cntr_") {
		t.Errorf("chat: %v", got["chat"])
	}
	check("agent_code", "output", "The agent computed 42")
	check("agent_function", "output", "Paris: sunny, 21 C in Paris")
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}

// clientModel is the scripted model of the tests that drive clients of
// others' (TestPythonSDKs, TestNodeAgentFrameworks): it answers each flow
// by what it is asked, runs code for the code interpreter's flows and calls
// get_weather where that is offered.
func clientModel(t *testing.T) llmtest.Step {
	code := map[string]string{
		"Sum the revenue": "import pandas as pd\nprint(pd.read_csv('/mnt/data/sales.csv')['revenue'].sum())",
		"Stream:":         "print(2 ** 10)",
		"Chat:":           "print(6 * 7)",
		"Agent: what is":  "print(6 * 7)",
		"Agents: what is": "print(6 * 7)",
		"AI SDK: what is": "print(6 * 7)",
	}
	prefix := map[string]string{"Sum the revenue": "Total revenue: ", "Stream:": "It is ", "Chat:": "Chat says ",
		"Agent: what is": "The agent computed ", "Agents: what is": "The agents computed ", "AI SDK: what is": "The AI SDK computed "}
	return func(req llmtest.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		for _, tool := range req.Tools {
			if tool.Function.Name == "get_weather" {
				if last.Role == "tool" {
					return llmtest.Answer("Paris: " + last.Content)
				}
				return llmtest.Reply{Calls: []llmtest.Call{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
			}
		}
		q := req.LastUser()
		for key, c := range code {
			if !strings.Contains(q, key) {
				continue
			}
			if last.Role == "tool" {
				res, _ := req.ToolResult()
				return llmtest.Answer(prefix[key] + strings.TrimSpace(res.Stdout))
			}
			return llmtest.RunPython(c)
		}
		t.Errorf("the scripted model has no answer for %q", q)
		return llmtest.Answer("?")
	}
}
