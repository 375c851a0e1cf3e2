package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrorKind says what went wrong in terms a caller can act on: retry, ask for
// a key, compact the conversation, or tell the user to fix the server.
type ErrorKind int

// Kinds of Error.
const (
	// KindServer is any other failure the server reported.
	KindServer ErrorKind = iota
	// KindAuth means the server refused the API key, or wanted one.
	KindAuth
	// KindModelNotFound means the server does not serve the requested model.
	KindModelNotFound
	// KindToolsUnsupported means the server or model cannot call tools as
	// configured; the fix is on the server.
	KindToolsUnsupported
	// KindContextLength means the conversation no longer fits the model.
	KindContextLength
	// KindUnreachable means no HTTP answer came back at all.
	KindUnreachable
	// KindRateLimited means 429 persisted through every retry.
	KindRateLimited
	// KindUnavailable means 502, 503 or 504 persisted through every retry.
	KindUnavailable
	// KindBadResponse means the reply could not be read: not the OpenAI
	// format, or a stream that broke off before the model finished.
	KindBadResponse
)

var kindNames = [...]string{
	KindServer:           "server",
	KindAuth:             "auth",
	KindModelNotFound:    "model not found",
	KindToolsUnsupported: "tools unsupported",
	KindContextLength:    "context length",
	KindUnreachable:      "unreachable",
	KindRateLimited:      "rate limited",
	KindUnavailable:      "unavailable",
	KindBadResponse:      "bad response",
}

func (k ErrorKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error is a failure to get a reply, in two layers: Msg says what the user
// should do, Err says what actually happened.
type Error struct {
	Kind ErrorKind
	// Status is the HTTP status, or the code a server put in an error it
	// streamed or sent as the body of a 200; 0 when there was none.
	Status int
	// Msg tells the user what to do, in one or two sentences.
	Msg string
	// Err is the cause, including the server's own message when it gave one.
	Err error
	// ContextWindow and PromptTokens are what a KindContextLength error
	// said of the model's context and of the request, in tokens; 0 when
	// the server did not say.
	ContextWindow, PromptTokens int
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + " (" + e.Err.Error() + ")"
}

func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is, or wraps, an *Error of kind k.
func IsKind(err error, k ErrorKind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

// serverError is the server's own account of a failure, the cause layer of
// an Error.
type serverError struct {
	// status is the HTTP status or the code inside a streamed error; 0 if
	// unknown.
	status  int
	message string
	// streamed tells that the error came inside a reply that had started.
	streamed bool
	// inBody tells that the error came as the body of a 200 reply, so
	// status, if set, is only the code the body names.
	inBody bool
	// body is the whole error body, for the fields some servers add
	// beside the message (llama.cpp's n_ctx).
	body string
	// retries is how many times the request was sent again before this
	// answer, for the message.
	retries int
}

func (e *serverError) Error() string {
	msg := e.message
	if msg == "" {
		msg = "no message"
	}
	switch {
	case e.streamed:
		return "the server reported mid-reply: " + msg
	case e.inBody:
		return "the server answered 200 OK with an error: " + msg
	case e.status != 0:
		return fmt.Sprintf("HTTP %d %s: %s", e.status, http.StatusText(e.status), msg)
	default:
		return "the server reported: " + msg
	}
}

// maxMessage bounds how much of an error body ends up in a message, so an
// HTML error page does not flood the terminal.
const maxMessage = 500

// errorMessage finds the server's message in an error body, whatever its
// shape: OpenAI's {"error":{"message":..}}, LM Studio's {"error":"..."},
// SGLang's {"object":"error","message":..}, FastAPI's {"detail":..}, or
// plain text. It also returns the numeric code the body carries, if any.
func errorMessage(body []byte) (msg string, code int) {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &v) == nil {
		switch {
		case present(v.Error):
			return errorValue(v.Error)
		case present(v.Message):
			return clip(jsonText(v.Message)), jsonInt(v.Code)
		case present(v.Detail):
			return clip(jsonText(v.Detail)), jsonInt(v.Code)
		}
	}
	return clip(plainText(body)), 0
}

var (
	htmlTag = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?s)<(script|style)\b.*?</(script|style)>|<[^>]*>`)
	})
	spaces = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s+`) })
)

// plainText makes a body that is not JSON fit one line of a message: a proxy
// or a web server in front of the model often answers with an HTML page,
// whose tags and line breaks would swamp what it says.
func plainText(body []byte) string {
	s := string(body)
	if strings.Contains(s, "<") && strings.Contains(s, ">") {
		s = htmlTag().ReplaceAllString(s, " ")
	}
	return spaces().ReplaceAllString(strings.TrimSpace(s), " ")
}

// errorValue reads the value of an "error" field: an object with a message
// and maybe a code, or just a string.
func errorValue(raw json.RawMessage) (msg string, code int) {
	var obj struct {
		Message json.RawMessage `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil && present(obj.Message) {
		return clip(jsonText(obj.Message)), jsonInt(obj.Code)
	}
	return clip(jsonText(raw)), 0
}

// present reports whether a field was in the JSON and not null.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// jsonText renders a JSON value as text: strings unquoted, lists of strings
// or of FastAPI's {"msg":..} joined, anything else as compact JSON.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		parts := make([]string, 0, len(list))
		for _, item := range list {
			var detail struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal(item, &detail) == nil && detail.Msg != "" {
				parts = append(parts, detail.Msg)
				continue
			}
			parts = append(parts, jsonText(item))
		}
		return strings.Join(parts, "; ")
	}
	return string(raw)
}

// jsonInt reads a code that servers send as a number or as a numeric string.
func jsonInt(raw json.RawMessage) int {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		_, _ = fmt.Sscanf(s, "%d", &n)
	}
	return n
}

// clip trims s and cuts it to maxMessage bytes on a rune boundary.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Substrings of server messages, lower-cased, that identify a failure whatever
// the status code: servers disagree on the status for the same problem.
var (
	toolsVLLM    = []string{"enable-auto-tool-choice", "tool-call-parser"}
	toolsLlama   = []string{"--jinja", "tools param requires"}
	toolsOllama  = []string{"does not support tools"}
	toolsGeneric = []string{"tools are not supported", "tool calling is not supported", "tool use is not supported", "tools not supported"}
	contextFull  = []string{
		"maximum context length",        // vLLM, OpenAI
		"maximum model length",          // vLLM 0.9+
		"context length",                // SGLang, Ollama
		"context size",                  // llama.cpp
		"context window",                // others
		"context_length_exceeded",       // OpenAI code
		"exceed_context_size",           // llama.cpp type
		"too many tokens in the prompt", // LM Studio
	}
	modelMissing = []string{"not found", "does not exist", "not exist", "no such model", "unknown model", "not loaded"}
)

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// classify turns a failure the server reported into an Error that tells the
// user what to do.
func (c *Client) classify(model string, se *serverError) *Error {
	e := &Error{Kind: KindServer, Status: se.status, Err: se}
	msg := strings.ToLower(se.message)
	switch {
	case containsAny(msg, toolsVLLM):
		e.Kind = KindToolsUnsupported
		e.Msg = fmt.Sprintf("The vLLM server at %s has tool calling turned off. Restart it with --enable-auto-tool-choice and the --tool-call-parser that matches the model (for example hermes for Qwen, llama3_json for Llama 3).", c.base)
	case containsAny(msg, toolsLlama):
		e.Kind = KindToolsUnsupported
		e.Msg = fmt.Sprintf("The llama.cpp server at %s needs the --jinja flag to call tools. Restart llama-server with --jinja.", c.base)
	case containsAny(msg, toolsOllama):
		e.Kind = KindToolsUnsupported
		e.Msg = fmt.Sprintf("The model %q on the server at %s does not support tools. Pull a model whose template supports tools (on Ollama: ollama.com/search?c=tools) and pass it with --model.", model, c.base)
	case containsAny(msg, toolsGeneric):
		e.Kind = KindToolsUnsupported
		e.Msg = fmt.Sprintf("The server at %s does not accept tools for the model %q. Enable tool calling on the server, or pass a model that supports it with --model.", c.base, model)
	case containsAny(msg, contextFull):
		e.Kind = KindContextLength
		e.ContextWindow, e.PromptTokens = contextNumbers(se.message + "\n" + se.body)
		e.Msg = fmt.Sprintf("The conversation no longer fits the context window of %q. Start a new conversation, or give the model a larger context on the server (vLLM --max-model-len, llama.cpp -c, Ollama num_ctx).", model)
	case se.status == http.StatusNotFound, strings.Contains(msg, "model") && containsAny(msg, modelMissing):
		e.Kind = KindModelNotFound
		e.Msg = fmt.Sprintf("The server at %s does not serve the model %q, or the base URL is wrong (it usually ends in /v1). List the models it serves with GET %s/models and pass one with --model.", c.base, model, c.base)
	case se.inBody && (se.status == 0 || se.status >= 500):
		// A 200 whose body is an error (OpenRouter, gateways): the code in
		// it is the upstream's, and a retry or a wait is not known to help.
		e.Msg = fmt.Sprintf("The server at %s answered with an error instead of a reply. Check its message, and the server's log.", c.base)
	case se.status == http.StatusUnauthorized, se.status == http.StatusForbidden:
		e.Kind = KindAuth
		e.Msg = c.authAdvice()
	case se.status == http.StatusTooManyRequests:
		e.Kind = KindRateLimited
		e.Msg = fmt.Sprintf("The server at %s is rate limiting requests%s. Wait a minute and try again.", c.base, c.afterRetries(se))
	case se.status == http.StatusBadGateway, se.status == http.StatusServiceUnavailable, se.status == http.StatusGatewayTimeout:
		e.Kind = KindUnavailable
		e.Msg = fmt.Sprintf("The server at %s is busy, down or still loading the model%s. Try again in a moment.", c.base, c.afterRetries(se))
	case se.streamed:
		e.Msg = fmt.Sprintf("The server at %s failed while answering. Try again, and check the server's log if it keeps happening.", c.base)
	case se.status == http.StatusInternalServerError && !se.inBody:
		e.Msg = fmt.Sprintf("The server at %s failed to answer%s. Check its message and its log.", c.base, c.afterRetries(se))
	default:
		e.Msg = fmt.Sprintf("The server at %s failed to answer. Check its message and its log.", c.base)
	}
	return e
}

// authAdvice says which key was refused and where it came from, since the
// usual cause is a key taken from the wrong place, or none at all: telling
// a user who set a key to set one sends them looking in the wrong place.
func (c *Client) authAdvice() string {
	if c.cfg.APIKey == "" {
		return fmt.Sprintf("The server at %s requires an API key and none was sent. Set %s.", c.base, keyVars(c.cfg.APIKeyEnv))
	}
	if from := c.cfg.APIKeySource; from != "" {
		return fmt.Sprintf("The server at %s rejected the API key from %s. Check that %s holds a valid key for this server.", c.base, from, from)
	}
	return fmt.Sprintf("The server at %s rejected the API key. Check that the key in %s is valid for this server.", c.base, keyVars(c.cfg.APIKeyEnv))
}

// keyVars names the variables a key may be set in.
func keyVars(env string) string {
	if env == "" || env == "TERP_API_KEY" {
		return "TERP_API_KEY"
	}
	return "TERP_API_KEY or " + env
}

// afterRetries tells how many retries were spent on a failure, since "try
// again" reads differently after five attempts.
func (c *Client) afterRetries(se *serverError) string {
	if se.streamed {
		return ""
	}
	return retriesText(se.retries)
}

func retriesText(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return " (after 1 retry)"
	default:
		return fmt.Sprintf(" (after %d retries)", n)
	}
}

// unreachable is the Error for a request that got no HTTP answer.
func (c *Client) unreachable(err error) *Error {
	return &Error{
		Kind: KindUnreachable,
		Msg:  fmt.Sprintf("Cannot reach the model server at %s. Check that the server is running and that --base-url is right.", c.base),
		Err:  err,
	}
}

// badResponse is the Error for a reply that cannot be read.
func (c *Client) badResponse(err error) *Error {
	e := &Error{Kind: KindBadResponse, Err: err}
	var broken *brokenError
	if errors.As(err, &broken) {
		e.Msg = fmt.Sprintf("The reply from %s stopped before the model finished%s. Try again, and check the server's log if it keeps happening.", c.base, retriesText(broken.retries))
	} else {
		e.Msg = fmt.Sprintf("The server at %s sent a reply that is not an OpenAI-compatible chat completion. Check that --base-url points to the API (it usually ends in /v1).", c.base)
	}
	return e
}
