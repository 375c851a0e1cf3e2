package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Model is one model a server serves, as GET /models lists it.
type Model struct {
	ID string
	// ContextWindow is the context length the server reports for the model
	// (vLLM's max_model_len, context_length or max_context_length
	// elsewhere), 0 when it reports none (Ollama, llama.cpp).
	ContextWindow int
}

// Models lists the models the server serves. Errors are *Error values.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models", nil)
	if err != nil {
		return nil, c.unreachable(err)
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "terp")
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, c.badResponse(&brokenError{err: err})
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := errorMessage(raw)
		if msg == "" {
			msg = resp.Status
		}
		se := &serverError{status: resp.StatusCode, message: msg, body: string(raw)}
		if resp.StatusCode == http.StatusNotFound {
			return nil, &Error{Kind: KindBadResponse, Status: resp.StatusCode, Err: se,
				Msg: fmt.Sprintf("The server at %s has no /models endpoint: the base URL is probably wrong (for OpenAI-compatible servers it usually ends in /v1).", c.base)}
		}
		return nil, c.classify("", se)
	}
	var list struct {
		Data []struct {
			ID               string `json:"id"`
			MaxModelLen      int    `json:"max_model_len"`
			ContextLength    int    `json:"context_length"`
			MaxContextLength int    `json:"max_context_length"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, c.badResponse(&garbledError{data: string(raw), err: err})
	}
	models := make([]Model, 0, len(list.Data))
	for _, m := range list.Data {
		window := m.MaxModelLen
		if window == 0 {
			window = m.ContextLength
		}
		if window == 0 {
			window = m.MaxContextLength
		}
		models = append(models, Model{ID: m.ID, ContextWindow: window})
	}
	return models, nil
}

// FindModel returns the model in models that name means: the same id, or
// the same but for case, an Ollama ":latest" tag or an organization prefix
// ("Qwen/Qwen3-32B" for "qwen3-32b").
func FindModel(models []Model, name string) (Model, bool) {
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimSuffix(s, ":latest"))
		return s
	}
	base := func(s string) string { return s[strings.LastIndex(s, "/")+1:] }
	for _, m := range models {
		if m.ID == name {
			return m, true
		}
	}
	for _, m := range models {
		if norm(m.ID) == norm(name) {
			return m, true
		}
	}
	for _, m := range models {
		if base(norm(m.ID)) == base(norm(name)) {
			return m, true
		}
	}
	return Model{}, false
}

// ContextWindow returns the context window the server reports for model, or
// 0 when it reports none.
func (c *Client) ContextWindow(ctx context.Context, model string) (int, error) {
	models, err := c.Models(ctx)
	if err != nil {
		return 0, err
	}
	m, _ := FindModel(models, model)
	return m.ContextWindow, nil
}
