package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Each case is an error reply as a real server sends it, and what the user
// must be told.
func TestErrorReplies(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		source string // Config.APIKeySource
		status int
		body   string
		kind   ErrorKind
		subs   []string // in Error(): advice and the server's own message
	}{
		{
			name: "401 with a key", key: "sk-wrong", status: 401,
			body: `{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`,
			kind: KindAuth,
			subs: []string{"rejected the API key", "the key in TERP_API_KEY or GPUOS_API_KEY", "Invalid API key", "/v1"},
		},
		{
			name: "401 with a key from TERP_API_KEY", key: "sk-wrong", source: "TERP_API_KEY", status: 401,
			body: `{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}`,
			kind: KindAuth,
			subs: []string{"rejected the API key from TERP_API_KEY", "Check that TERP_API_KEY holds a valid key"},
		},
		{
			name: "401 without a key", status: 401,
			body: `{"error":"Unauthorized"}`,
			kind: KindAuth,
			subs: []string{"requires an API key and none was sent", "TERP_API_KEY or GPUOS_API_KEY"},
		},
		{
			name: "403", key: "sk-limited", status: 403,
			body: `{"detail":"Not authenticated"}`,
			kind: KindAuth,
			subs: []string{"rejected the API key", "Not authenticated"},
		},
		{
			name: "404 model, vLLM", status: 404,
			body: "{\"object\":\"error\",\"message\":\"The model `qwen3-33b` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}",
			kind: KindModelNotFound,
			subs: []string{`"qwen3-33b"`, "/v1/models", "does not exist"},
		},
		{
			name: "404 model, Ollama", status: 404,
			body: `{"error":{"message":"model \"qwen3:33b\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
			kind: KindModelNotFound,
			subs: []string{"GET http://", "try pulling it first"},
		},
		{
			name: "model not found with status 400", status: 400,
			body: `{"error":{"message":"Model qwen3-33b is not found","code":400}}`,
			kind: KindModelNotFound,
		},
		{
			name: "tools unsupported, vLLM", status: 400,
			body: `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
			kind: KindToolsUnsupported,
			subs: []string{"Restart it with --enable-auto-tool-choice", "--tool-call-parser"},
		},
		{
			name: "tools unsupported, Ollama", status: 400,
			body: `{"error":{"message":"registry.ollama.ai/library/gemma2:2b does not support tools","type":"api_error","param":null,"code":null}}`,
			kind: KindToolsUnsupported,
			subs: []string{"does not support tools", "--model"},
		},
		{
			name: "tools unsupported, llama.cpp", status: 500,
			body: `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`,
			kind: KindToolsUnsupported,
			subs: []string{"Restart llama-server with --jinja"},
		},
		{
			name: "context length, vLLM", status: 400,
			body: `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			kind: KindContextLength,
			subs: []string{"Start a new conversation", "32768 tokens"},
		},
		{
			name: "context length, SGLang", status: 400,
			body: `{"object":"error","message":"The input (40000 tokens) is longer than the model's context length (32768 tokens).","type":"BadRequestError","param":null,"code":400}`,
			kind: KindContextLength,
		},
		{
			name: "context length, llama.cpp", status: 400,
			body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":40000,"n_ctx":32768}}`,
			kind: KindContextLength,
		},
		{
			name: "context length, Ollama", status: 400,
			body: `{"error":{"message":"the prompt is longer than the context length","type":"api_error"}}`,
			kind: KindContextLength,
		},
		{
			name: "SGLang error object", status: 400,
			body: `{"object":"error","message":"temperature must be non-negative","type":"BadRequestError","param":null,"code":400}`,
			kind: KindServer,
			subs: []string{"HTTP 400 Bad Request: temperature must be non-negative"},
		},
		{
			name: "LM Studio string error", status: 400,
			body: `{"error":"Unexpected endpoint or method. (POST /v1/chat/completion)"}`,
			kind: KindServer,
			subs: []string{"Unexpected endpoint or method."},
		},
		{
			name: "plain-text error body", status: 501,
			body: "Not Implemented: CUDA graphs",
			kind: KindServer,
			subs: []string{"HTTP 501 Not Implemented: Not Implemented: CUDA graphs", "failed to answer"},
		},
		{
			name: "empty body", status: 501,
			kind: KindServer,
			subs: []string{"501 Not Implemented"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, jsonBody(tt.status, tt.body))
			c, waits := newTestClient(srv.URL, Config{Stream: true, APIKey: tt.key, APIKeySource: tt.source, APIKeyEnv: "GPUOS_API_KEY"})
			_, err := c.Complete(context.Background(), Request{Model: "qwen3-33b"}, nil)
			e := wantError(t, err, tt.kind, tt.subs...)
			if e.Status != tt.status {
				t.Errorf("Status = %d, want %d", e.Status, tt.status)
			}
			if !strings.Contains(e.Msg, srv.URL) && tt.kind != KindContextLength {
				t.Errorf("Msg %q does not name the server", e.Msg)
			}
			if tt.key != "" && strings.Contains(e.Msg, "Set ") {
				t.Errorf("Msg %q tells a user who sent a key to set one", e.Msg)
			}
			if n := srv.hits.Load(); n != 1 {
				t.Errorf("server got %d requests, want 1 (waits %v)", n, waits.all())
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()

	c, waits := newTestClient(url, Config{Stream: true})
	_, err = c.Complete(context.Background(), Request{Model: "m"}, nil)
	e := wantError(t, err, KindUnreachable, "Cannot reach the model server at "+url+"/v1", "--base-url", "connection refused")
	if e.Status != 0 {
		t.Errorf("Status = %d, want 0", e.Status)
	}
	if n := len(waits.all()); n != defaultRetries {
		t.Errorf("retried %d times, want %d", n, defaultRetries)
	}
}

func TestCancelledContext(t *testing.T) {
	srv := newServer(t, sse("data: [DONE]\n\n"))
	c, _ := newTestClient(srv.URL, Config{Stream: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Complete(ctx, Request{Model: "m"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestErrorMessageShapes(t *testing.T) {
	tests := []struct {
		body     string
		wantMsg  string
		wantCode int
	}{
		{`{"error":{"message":"bad","code":400}}`, "bad", 400},
		{`{"error":{"message":"bad","code":"400"}}`, "bad", 400},
		{`{"error":{"message":["a","b"]}}`, "a; b", 0},
		{`{"error":"plain"}`, "plain", 0},
		{`{"object":"error","message":"sglang","code":400}`, "sglang", 400},
		{`{"detail":[{"loc":["body","messages"],"msg":"field required","type":"value_error.missing"}]}`, "field required", 0},
		{"  upstream timed out\n", "upstream timed out", 0},
		{strings.Repeat("x", 2000), strings.Repeat("x", maxMessage) + "…", 0},
	}
	for _, tt := range tests {
		msg, code := errorMessage([]byte(tt.body))
		if msg != tt.wantMsg || code != tt.wantCode {
			t.Errorf("errorMessage(%.40q) = %q, %d; want %q, %d", tt.body, msg, code, tt.wantMsg, tt.wantCode)
		}
	}
}

func TestErrorLayers(t *testing.T) {
	cause := errors.New("dial tcp: connection refused")
	err := error(&Error{Kind: KindUnreachable, Msg: "Start the server.", Err: cause})
	if got, want := err.Error(), "Start the server. (dial tcp: connection refused)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, cause) {
		t.Error("Error does not unwrap to its cause")
	}
	wrapped := fmt.Errorf("step 2: %w", err)
	if !IsKind(wrapped, KindUnreachable) || IsKind(wrapped, KindAuth) || IsKind(cause, KindUnreachable) {
		t.Error("IsKind does not see through wrapping, or matches the wrong kind")
	}
	if KindToolsUnsupported.String() != "tools unsupported" {
		t.Errorf("String() = %q", KindToolsUnsupported.String())
	}
}

// Any other status still yields the server's message.
func TestOtherStatus(t *testing.T) {
	srv := newServer(t, jsonBody(http.StatusTeapot, `{"error":{"message":"I'm a teapot"}}`))
	c, _ := newTestClient(srv.URL, Config{})
	_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
	wantError(t, err, KindServer, "HTTP 418", "I'm a teapot")
}

func TestHTMLErrorPageBecomesOneLine(t *testing.T) {
	page := "<!DOCTYPE HTML>\n<html>\n  <head><title>Error response</title><style>p {color: red}</style></head>\n" +
		"  <body>\n    <h1>Error response</h1>\n    <p>Message: Unsupported method ('GET').</p>\n  </body>\n</html>\n"
	got, _ := errorMessage([]byte(page))
	want := "Error response Error response Message: Unsupported method ('GET')."
	if got != want {
		t.Errorf("errorMessage(HTML page) = %q, want %q", got, want)
	}
}

// An error sent as the body of a 200, whole or as the first chunk of a
// stream, is the server's message, not an HTTP 500 that never happened.
func TestErrorIn200(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"whole body", jsonBody(200, `{"error":{"message":"Internal error in the upstream provider","code":500}}`),
			"the server answered 200 OK with an error: Internal error in the upstream provider"},
		{"as a chunk", sse("data: {\"error\":{\"message\":\"Internal error in the upstream provider\",\"code\":500}}\n\n"),
			"the server reported mid-reply: Internal error in the upstream provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.handler)
			c, _ := newTestClient(srv.URL, Config{Stream: true})
			_, err := c.Complete(context.Background(), Request{Model: "m"}, nil)
			e := wantError(t, err, KindServer, tt.want)
			if strings.Contains(e.Error(), "HTTP 500") {
				t.Errorf("error %q reports an HTTP status the server did not send", e)
			}
			if n := srv.hits.Load(); n != 1 {
				t.Errorf("server got %d requests, want 1", n)
			}
		})
	}
}
