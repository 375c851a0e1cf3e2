package openaiapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/terptest"
)

// brokenFiles is a state whose files can be neither read nor stored: a
// disk or a database that fails, not a file that is not there.
type brokenFiles struct{ state.State }

var errBroken = errors.New("the disk is on fire")

func (brokenFiles) File(context.Context, string, string) (state.File, error) {
	return state.File{}, errBroken
}

func (brokenFiles) PutFile(_ context.Context, f state.File, _ io.Reader, _ int64) (state.File, error) {
	return f, errBroken
}

// When the state fails, the client is told it is terp's failure: a 500
// with an error id whose log line has the cause (never the cause itself,
// which may name host paths), never a 400 saying the file it named is not
// there, which would send it looking for a mistake of its own.
func TestFileStateFailuresAreServerErrors(t *testing.T) {
	dir, err := state.OpenDir(terptest.TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	ts := newTestServer(t, llmtest.New(t, llmtest.Fixed(llmtest.Answer("hi"))), func(c *serve.Config) {
		c.State, c.Log = brokenFiles{dir}, slog.New(slog.NewTextHandler(log, nil))
	})
	alice := ts.client(aliceKey)
	cntr, err := alice.Containers.New(ctx(t), openai.ContainerNewParams{Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	prev, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: "test-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}, Tools: []responses.ToolUnionParam{codeInterpreter()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		send func() answer
	}{
		{"an upload", func() answer { return postUpload(t, ts.URL+"/v1/files", []byte("a,b\n1,2\n")) }},
		{"a new container's file_ids", func() answer {
			return post(t, ts.URL+"/v1/containers", aliceKey, `{"name": "c", "file_ids": ["file-123"]}`)
		}},
		{"a container file by file_id", func() answer {
			return post(t, ts.URL+"/v1/containers/"+cntr.ID+"/files", aliceKey, `{"file_id": "file-123"}`)
		}},
		{"a response's container file_ids", func() answer {
			return post(t, ts.URL+"/v1/responses", aliceKey, `{"model": "test-model", "input": "hi",
				"tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-123"]}}]}`)
		}},
		{"file_ids for the previous response's container", func() answer {
			return post(t, ts.URL+"/v1/responses", aliceKey, `{"model": "test-model", "input": "hi", "previous_response_id": "`+prev.ID+`",
				"tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-123"]}}]}`)
		}},
		{"an input_file", func() answer {
			return post(t, ts.URL+"/v1/responses", aliceKey, `{"model": "test-model",
				"input": [{"role": "user", "content": [{"type": "input_text", "text": "Read it."}, {"type": "input_file", "file_id": "file-123"}]}],
				"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.send()
			id := regexp.MustCompile(`internal error (err_[0-9a-f]+)`).FindStringSubmatch(got.body)
			if got.StatusCode != http.StatusInternalServerError || id == nil || strings.Contains(got.body, errBroken.Error()) || !strings.Contains(got.body, "server_error") {
				t.Fatalf("%d %s; want a 500 with an error id, without the cause", got.StatusCode, got.body)
			}
			if !regexp.MustCompile(`error_id=` + id[1] + `.*` + errBroken.Error()).MatchString(log.String()) {
				t.Errorf("the log has no line with the id %s and the cause:\n%s", id[1], log)
			}
		})
	}
}
