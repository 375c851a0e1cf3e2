package openaiapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest"
)

// nodeSDK is the npm package of client.mjs, an app written for OpenAI with
// the official Node SDK; the MCP Inspector test (internal/cli) shares it.
const nodeSDK = "../../../testdata/node"

// nodeReport is one line client.mjs prints: what the app saw in one flow.
// Each flow fills the fields it has.
type nodeReport struct {
	Flow        string `json:"flow"`
	FileID      string `json:"file_id"`
	Status      string `json:"status"`
	OutputText  string `json:"output_text"`
	Code        string `json:"code"`
	Logs        string `json:"logs"`
	ContainerID string `json:"container_id"`
	Citation    struct {
		Type        string `json:"type"`
		ContainerID string `json:"container_id"`
		FileID      string `json:"file_id"`
		Filename    string `json:"filename"`
	} `json:"citation"`
	Filename           string   `json:"filename"`
	Content            string   `json:"content"`
	PreviousResponseID string   `json:"previous_response_id"`
	Types              []string `json:"types"`
	Sequence           []int    `json:"sequence"`
	Text               string   `json:"text"`
	CompletedText      string   `json:"completed_text"`
	CompletedStatus    string   `json:"completed_status"`
	Name               string   `json:"name"`
	Listed             bool     `json:"listed"`
	Gone               bool     `json:"gone"`
	Arguments          string   `json:"arguments"`
}

// An app written with the official Node SDK (npm's openai) runs against
// terp serve unchanged: an uploaded CSV reaches the code, whose output the
// answer is computed from; the cited file comes back from its container; a
// follow-up sees the first run's variable; a stream sends the code
// interpreter's events in order; containers come and go; and a function
// tool of the app's own makes the round trip.
func TestNodeSDK(t *testing.T) {
	node := terptest.Node(t, nodeSDK, "openai")
	// go test caches a result by the files the test opened, which do not
	// include those node reads: a changed script must run again.
	if _, err := os.ReadFile(filepath.Join(nodeSDK, "client.mjs")); err != nil {
		t.Fatal(err)
	}
	const analysis = "import pandas as pd\ndf = pd.read_csv('/work/sales.csv')\n" +
		"df['revenue'].mul(2).to_csv('/work/double.csv', index=False)\nprint(df['revenue'].sum())"
	s := llmtest.New(t,
		// files
		llmtest.Fixed(llmtest.RunPython(analysis)),
		answerFromTool("Total revenue: "),
		// follow_up
		func(req llmtest.Request) llmtest.Reply {
			if !slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool {
				return len(m.ToolCalls) > 0 && strings.Contains(m.ToolCalls[0].Function.Arguments, "read_csv")
			}) {
				t.Error("the follow-up's model does not see the first response's code")
			}
			return llmtest.RunPython("print(df['revenue'].sum() * 2)")
		},
		answerFromTool("Twice that: "),
		// stream
		llmtest.Fixed(llmtest.RunPython("print(2 ** 10)")),
		answerFromTool("It is "),
		// function
		func(req llmtest.Request) llmtest.Reply {
			offered := false
			for _, tool := range req.Tools {
				offered = offered || tool.Function.Name == "get_weather"
			}
			if !offered {
				t.Errorf("the model is not offered get_weather: %+v", req.Tools)
			}
			return llmtest.Reply{Calls: []llmtest.Call{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
		},
		func(req llmtest.Request) llmtest.Reply {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" {
				t.Errorf("the model's last message is %+v; want the app's function output", last)
			}
			return llmtest.Answer("Paris: " + last.Content)
		})
	ts := newTestServer(t, s)

	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, node, "client.mjs")
	cmd.Dir = nodeSDK
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+ts.URL+"/v1", "OPENAI_API_KEY="+aliceKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	got := map[string]nodeReport{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r nodeReport
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("client.mjs printed %q: %v", sc.Text(), err)
		}
		got[r.Flow] = r
	}
	for _, flow := range []string{"files", "cited_file", "follow_up", "stream", "containers", "function"} {
		if _, ok := got[flow]; !ok {
			t.Errorf("client.mjs reported no %q flow; stdout:\n%s", flow, stdout.String())
		}
	}

	files := got["files"]
	if files.Status != "completed" || files.OutputText != "Total revenue: 350" {
		t.Errorf("the analysis answered %q (%s); the upload did not reach /work", files.OutputText, files.Status)
	}
	if files.Code != analysis || files.Logs != "350\n" || !strings.HasPrefix(files.ContainerID, "cntr_") || !strings.HasPrefix(files.FileID, "file-") {
		t.Errorf("the app saw code %q, logs %q, container %q, upload %q", files.Code, files.Logs, files.ContainerID, files.FileID)
	}
	if cite := files.Citation; cite.Type != "container_file_citation" || cite.Filename != "double.csv" ||
		!strings.HasPrefix(cite.FileID, "cfile_") || cite.ContainerID != files.ContainerID {
		t.Errorf("citation = %+v", cite)
	}
	if cf := got["cited_file"]; cf.Filename != "double.csv" || cf.Content != "revenue\n200\n500\n" {
		t.Errorf("the cited %s holds %q", cf.Filename, cf.Content)
	}
	if f := got["follow_up"]; f.OutputText != "Twice that: 700" || f.PreviousResponseID == "" {
		t.Errorf("the follow-up answered %q (previous %q); want the variable kept (700)", f.OutputText, f.PreviousResponseID)
	}

	st := got["stream"]
	order := []string{"response.created", "response.output_item.added", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed",
		"response.output_text.delta", "response.output_text.done", "response.completed"}
	if !inOrder(st.Types, order) || len(st.Types) == 0 || st.Types[len(st.Types)-1] != "response.completed" {
		t.Errorf("the stream's events:\n%q\nwant, in this order and ending the stream:\n%q", st.Types, order)
	}
	for i, n := range st.Sequence {
		if n != i {
			t.Errorf("sequence numbers %v do not count from 0", st.Sequence)
			break
		}
	}
	if st.Text != "It is 1024" || st.CompletedText != "It is 1024" || st.CompletedStatus != "completed" {
		t.Errorf("streamed text %q, completed %q (%s); want It is 1024", st.Text, st.CompletedText, st.CompletedStatus)
	}

	if cn := got["containers"]; cn.Name != "node-sdk" || cn.Status != "running" || !cn.Listed || !cn.Gone {
		t.Errorf("containers: %+v; want node-sdk running, listed, then gone", cn)
	}
	if fn := got["function"]; fn.Name != "get_weather" || fn.Arguments != `{"city":"Paris"}` || fn.OutputText != "Paris: sunny, 21 C in Paris" {
		t.Errorf("function tool: called %s(%s), answered %q", fn.Name, fn.Arguments, fn.OutputText)
	}
	if t.Failed() {
		t.Logf("node stderr:\n%s", stderr.String())
	}
}

// inOrder reports whether want appears in got in order, perhaps with
// other entries between.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// The agent frameworks' own code-interpreter tools work against terp serve
// unchanged: the OpenAI Agents SDK's codeInterpreterTool() and a function
// tool of its own (through the Responses adapter), and the AI SDK's
// openai.tools.codeInterpreter(), each answered from the code's output.
func TestNodeAgentFrameworks(t *testing.T) {
	node := terptest.Node(t, nodeSDK, "@openai/agents", "ai", "@ai-sdk/openai")
	if _, err := os.ReadFile(filepath.Join(nodeSDK, "frameworks.mjs")); err != nil { // for go test's cache
		t.Fatal(err)
	}
	ts := newTestServer(t, llmtest.New(t, slices.Repeat([]llmtest.Step{clientModel(t)}, 12)...))
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, node, "frameworks.mjs")
	cmd.Dir = nodeSDK
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+ts.URL+"/v1", "OPENAI_API_KEY="+aliceKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node frameworks.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var r struct{ Flow, Output string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("frameworks.mjs printed %q: %v", sc.Text(), err)
		}
		got[r.Flow] = r.Output
	}
	for flow, want := range map[string]string{
		"agents_code":     "The agents computed 42",
		"agents_function": "Paris: sunny, 21 C in Paris",
		"ai_sdk_code":     "The AI SDK computed 42",
	} {
		if got[flow] != want {
			t.Errorf("%s answered %q; want %q\nstderr:\n%s", flow, got[flow], want, stderr.String())
		}
	}
}
