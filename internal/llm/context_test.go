package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Context-overflow errors as each server sends them, with what they say of
// the window and of the request.
var overflowBodies = []struct {
	server         string
	status         int
	body           string
	window, prompt int
}{
	{"vLLM", 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, 4096, 4096},
	{"vLLM 0.10", 400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your request has 9100 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`, 8192, 9100},
	{"vLLM V1", 400, `{"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that ` + "`max_model_len`" + ` is no smaller than the number of text tokens.","type":"BadRequestError","code":400}}`, 4096, 5000},
	{"SGLang", 400, `{"object":"error","message":"The input (5000 tokens) is longer than the model's context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}`, 4096, 5000},
	{"llama.cpp", 400, `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`, 8192, 13392},
	{"Ollama", 400, `{"error":{"message":"the prompt is longer than the context length","type":"api_error","param":null,"code":null}}`, 0, 0},
	{"Ollama, truncate off", 400, `{"error":"the input length exceeds the context length"}`, 0, 0},
}

func TestContextOverflowErrors(t *testing.T) {
	for _, tt := range overflowBodies {
		t.Run(tt.server, func(t *testing.T) {
			srv := newServer(t, jsonBody(tt.status, tt.body))
			c, _ := newTestClient(srv.URL, Config{})
			_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			e := wantError(t, err, KindContextLength, "context window")
			if e.ContextWindow != tt.window || e.PromptTokens != tt.prompt {
				t.Errorf("window %d prompt %d, want %d %d", e.ContextWindow, e.PromptTokens, tt.window, tt.prompt)
			}
		})
	}
}

func TestModels(t *testing.T) {
	srv := httpServer(t, map[string]string{
		"/v1/models": `{"object":"list","data":[{"id":"Qwen/Qwen3-32B","object":"model","max_model_len":32768},{"id":"llama3.1:8b","object":"model"},{"id":"lms","context_length":4096}]}`,
	})
	c, _ := newTestClient(srv.URL, Config{})
	models, err := c.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 3 || models[0].ContextWindow != 32768 || models[1].ContextWindow != 0 || models[2].ContextWindow != 4096 {
		t.Errorf("models = %+v", models)
	}
	for name, want := range map[string]string{"qwen3-32b": "Qwen/Qwen3-32B", "Qwen/Qwen3-32B": "Qwen/Qwen3-32B", "llama3.1:8b": "llama3.1:8b", "LLAMA3.1:8B:latest": "llama3.1:8b"} {
		if m, ok := FindModel(models, name); !ok || m.ID != want {
			t.Errorf("FindModel(%q) = %+v %v, want %s", name, m, ok, want)
		}
	}
	if _, ok := FindModel(models, "mistral"); ok {
		t.Error("FindModel found a model that is not served")
	}
	if n, err := c.ContextWindow(context.Background(), "qwen3-32b"); err != nil || n != 32768 {
		t.Errorf("ContextWindow = %d, %v", n, err)
	}

	bare := httpServer(t, nil)
	c, _ = newTestClient(bare.URL, Config{})
	_, err = c.Models(context.Background())
	wantError(t, err, KindBadResponse, "base URL")
}

// httpServer answers GET paths with fixed JSON bodies and 404 elsewhere.
func httpServer(t *testing.T, bodies map[string]string) *server {
	t.Helper()
	s := &server{}
	mux := http.NewServeMux()
	for path, body := range bodies {
		mux.HandleFunc(path, jsonBody(http.StatusOK, body))
	}
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}
