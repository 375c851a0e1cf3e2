package llm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest/strict"
	"github.com/terpdev/terp/internal/terptest"
)

// Recorded replies: testdata/replies holds one file per server behaviour,
// NAME.sse for a streamed reply and NAME.json for a whole one, each a short
// header of "# " lines (the server, the issue it comes from, what is odd
// about it) up to a line "---", then the body exactly as the server sends
// it, byte for byte (CRLF and all; the directory's .gitattributes keeps git
// from touching them). NAME.golden beside it is what terp makes of it: the
// normalized Response, and the messages the next request sends back after
// the reply's calls were answered, or the error. Adding a server's quirk is
// adding a file: run `go test ./internal/llm/ -run TestRecordedReplies
// -update`, then read the golden file it wrote.
//
// A header line "# replay: ..." changes how the body is served, for what
// a body alone cannot show (testdata/replies/README.md lists them):
// "status N" answers with HTTP status N, "key K" makes the client send the
// key K from TERP_API_KEY, and "cut" closes the connection in the middle
// of a chunk of the chunked body, as a server or proxy that dies does.

// golden is what a recorded reply comes to.
type golden struct {
	Response *Response `json:"response,omitempty"`
	// SentBack are the messages of the next request after the first user
	// message, as they go on the wire: the reply, then "ok" for each call.
	SentBack []json.RawMessage `json:"sent_back,omitempty"`
	Error    *goldenError      `json:"error,omitempty"`
}

type goldenError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func TestRecordedReplies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "replies", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		ext := filepath.Ext(path)
		if ext != ".sse" && ext != ".json" {
			continue
		}
		n++
		t.Run(filepath.Base(path), func(t *testing.T) {
			body, how := recordedBody(t, path)
			got := replay(t, body, ext == ".sse", how)
			goldenPath := strings.TrimSuffix(path, ext) + ".golden"
			checkGolden(t, goldenPath, got)
		})
	}
	if n == 0 {
		t.Fatal("no recorded replies in testdata/replies")
	}
}

// replayHow is what the "# replay:" lines of a header ask for.
type replayHow struct {
	status int    // the HTTP status; 200 when 0
	key    string // the API key the client sends
	cut    bool   // close the connection in the middle of the body's chunk
}

// recordedBody is the body of a recorded reply, what follows its header,
// and how to serve it.
func recordedBody(t *testing.T, path string) ([]byte, replayHow) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var how replayHow
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		text := string(bytes.TrimRight(line, "\r"))
		switch {
		case text == "---":
			return data, how
		case strings.HasPrefix(text, "# replay:"):
			directive := strings.Fields(strings.TrimPrefix(text, "# replay:"))
			switch {
			case len(directive) == 2 && directive[0] == "status":
				if _, err := fmt.Sscanf(directive[1], "%d", &how.status); err != nil {
					t.Fatalf("%s: %q: %v", path, text, err)
				}
			case len(directive) == 2 && directive[0] == "key":
				how.key = directive[1]
			case len(directive) == 1 && directive[0] == "cut":
				how.cut = true
			default:
				t.Fatalf("%s: unknown directive %q", path, text)
			}
		case !strings.HasPrefix(text, "#"):
			t.Fatalf("%s: header line %q is neither a comment nor ---", path, line)
		}
	}
	t.Fatalf("%s: no --- line ends the header", path)
	return nil, how
}

// serveCut writes body as one chunk of a chunked reply that announces more
// than it holds, then closes the connection: the client reads the body and
// then io.ErrUnexpectedEOF, as when a server dies mid-reply.
func serveCut(t *testing.T, w http.ResponseWriter, status int, contentType string, body []byte) {
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n", status, http.StatusText(status), contentType)
	fmt.Fprintf(rw, "%x\r\n", len(body)+64)
	_, _ = rw.Write(body)
	_ = rw.Flush()
}

// replay serves body as the answer to one request, then answers the
// follow-up (the reply's calls answered with "ok") with a plain answer and
// records what it was sent. The follow-up is answered as the strictest
// servers answer it (see package strict): a history that one of them would
// reject gets its 400, and fails the test.
func replay(t *testing.T, body []byte, stream bool, how replayHow) golden {
	t.Helper()
	var followUp []byte
	var srv *server
	srv = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if srv.hits.Load() > 1 {
			followUp, _ = io.ReadAll(r.Body)
			if err := strict.Check(followUp); err != nil {
				msg, _ := json.Marshal(err.Error())
				jsonBody(http.StatusBadRequest, `{"error":{"message":`+string(msg)+`,"type":"BadRequestError","code":400}}`)(w, r)
				return
			}
			jsonBody(200, `{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`)(w, r)
			return
		}
		contentType := "application/json"
		if stream {
			contentType = "text/event-stream"
		}
		status := cmp.Or(how.status, http.StatusOK)
		if how.cut {
			serveCut(t, w, status, contentType, body)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	cfg := Config{Stream: stream, MaxRetries: -1}
	if how.key != "" {
		cfg.APIKey, cfg.APIKeySource = how.key, "TERP_API_KEY"
	}
	c, _ := newTestClient(srv.URL, cfg)
	req := Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "q"}}, Tools: []Tool{runPythonTool}, CodeTool: "run_python"}
	r, err := c.Complete(context.Background(), req, nil)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Complete = %T %v, want an *Error or a Response", err, err)
		}
		// The server's address changes with every run.
		msg := strings.ReplaceAll(e.Error(), srv.URL, "http://SERVER")
		return golden{Error: &goldenError{Kind: e.Kind.String(), Message: msg}}
	}
	next := append(req.Messages, r.Message())
	if r.Written == "" {
		for _, call := range r.ToolCalls {
			next = append(next, Message{Role: RoleTool, ToolCallID: call.ID, Content: "ok"})
		}
	}
	req.Messages = next
	if _, err := c.Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("the follow-up request: %v", err)
	}
	var sent struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(followUp, &sent); err != nil {
		t.Fatalf("the follow-up request is not JSON: %v\n%s", err, followUp)
	}
	g := golden{Response: &r, SentBack: sent.Messages[1:]}
	stableIDs(&g)
	return g
}

// runPythonTool is the tool terp offers, as the recorded requests had it.
var runPythonTool = Tool{
	Name:        "run_python",
	Description: "Run Python code.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`),
}

// stableIDs puts the same placeholder for every id terp made up, in the
// response and in what went back, so golden files do not change per run.
func stableIDs(g *golden) {
	for i := range g.Response.ToolCalls {
		id := g.Response.ToolCalls[i].ID
		if !synthPattern.MatchString(id) {
			continue
		}
		stable := fmt.Sprintf("call_synthesized%d", i)
		g.Response.ToolCalls[i].ID = stable
		for j, m := range g.SentBack {
			g.SentBack[j] = bytes.ReplaceAll(m, []byte(id), []byte(stable))
		}
	}
}

func checkGolden(t *testing.T, path string, got golden) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	terptest.Golden(t, path, append(b, '\n'), nil)
}
