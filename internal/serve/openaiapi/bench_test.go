package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sandbox/memory"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/store"
)

// BenchmarkGateway measures what terp serve adds to a turn over running it
// on the conversation service directly, as terp ask does: the same scripted
// model over real HTTP, the same in-memory sandbox (so that the sandbox's
// own cost, the same on both sides, does not hide the gateway's), one
// conversation going on turn after turn. "answer" is a turn with no code;
// "step" runs one piece of code first. The ratio of serve to direct is the
// gateway's cost; see docs/benchmarks.md.
func BenchmarkGateway(b *testing.B) {
	for _, kind := range []string{"answer", "step"} {
		reply := func(int) []llmtest.Step { return []llmtest.Step{llmtest.Fixed(llmtest.Answer("42"))} }
		if kind == "step" {
			reply = func(int) []llmtest.Step {
				return []llmtest.Step{llmtest.Fixed(llmtest.RunPython("print 42")), llmtest.Fixed(llmtest.Answer("42"))}
			}
		}
		script := func(n int) []llmtest.Step {
			var steps []llmtest.Step
			for i := range n {
				steps = append(steps, reply(i)...)
			}
			return steps
		}
		b.Run(kind+"/direct", func(b *testing.B) {
			s := llmtest.New(b, script(b.N+1)...)
			svc, cfg := benchService(b, s)
			conv, err := svc.Open(context.Background(), cfg, conversation.Options{Origin: "bench", KeepFiles: true})
			if err != nil {
				b.Fatal(err)
			}
			defer conv.Close(context.Background())
			b.ResetTimer()
			for range b.N {
				turn, err := conv.Ask(context.Background(), "what is it?", nil)
				if err != nil || turn.Result.Answer != "42" {
					b.Fatalf("%q, %v", turn.Result.Answer, err)
				}
			}
		})
		b.Run(kind+"/serve", func(b *testing.B) {
			s := llmtest.New(b, script(b.N+1)...)
			svc, cfg := benchService(b, s)
			srv, err := serve.New(serve.Config{Conversations: svc, Settings: cfg, DataDir: b.TempDir(), NoAuth: true})
			if err != nil {
				b.Fatal(err)
			}
			Register(srv, Options{})
			hs := httptest.NewServer(srv.Handler())
			defer func() { hs.Close(); srv.Close(context.Background()) }()
			prev := ""
			b.ResetTimer()
			for range b.N {
				body := map[string]any{"model": "test-model", "input": "what is it?",
					"tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]string{"type": "auto"}}}}
				if prev != "" {
					body["previous_response_id"] = prev
				}
				var got struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				}
				if err := postJSON(hs.URL+"/v1/responses", body, &got); err != nil || got.Status != "completed" {
					b.Fatalf("%+v, %v", got, err)
				}
				prev = got.ID
			}
		})
	}
}

func benchService(b *testing.B, s *llmtest.Server) (*conversation.Service, *config.Config) {
	st, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	backend := memory.New(memory.Config{Programs: map[string]memory.Program{"python3": memory.PythonStandIn}})
	cfg := config.Default()
	cfg.BaseURL, cfg.Model, cfg.Sandbox, cfg.ExecMode = s.BaseURL(), "test-model", "memory", "script"
	return conversation.New(conversation.Deps{
		Store:      st,
		NewBackend: func(*config.Config) (sandbox.Backend, error) { return backend, nil },
		NewModel:   func(c *config.Config) agent.Completer { return llm.New(llm.Config{BaseURL: c.BaseURL}) },
	}), cfg
}

func postJSON(url string, body, into any) error {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
