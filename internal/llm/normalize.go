package llm

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
)

// assembler builds one normalized Response out of the pieces of a reply,
// whatever server sent them: every quirk of QUIRKS.md is resolved here, once,
// for streamed and whole replies alike.
type assembler struct {
	// onDelta, when set, receives text as it is assembled.
	onDelta func(Delta)

	think thinkSplitter
	// guard, when set, holds back content that may be a tool call written
	// as text (see callGuard).
	guard     *callGuard
	content   strings.Builder
	reasoning strings.Builder
	calls     []*callBuilder
	finish    string
	usage     Usage
}

// callBuilder is one tool call while its pieces arrive.
type callBuilder struct {
	index    int
	hasIndex bool
	id, name string
	args     strings.Builder
}

// add takes one decoded reply: a stream chunk, or a whole completion when
// whole is set. A whole completion lists complete calls, which need no
// merging by index or id.
func (a *assembler) add(r *reply, whole bool) {
	for _, choice := range r.Choices {
		m := choice.Delta
		if m == nil {
			m = choice.Message
		}
		if m != nil {
			a.text(DeltaReasoning, m.reasoningText())
			if m.Content != "" {
				a.think.feed(string(m.Content), a.segment)
			}
			for i := range m.ToolCalls {
				if whole {
					a.calls = append(a.calls, newCall(&m.ToolCalls[i]))
				} else {
					a.mergeCall(&m.ToolCalls[i])
				}
			}
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
	if r.Usage != nil && *r.Usage != (Usage{}) {
		a.usage = *r.Usage
	}
}

func (a *assembler) segment(s segment) {
	switch s.kind {
	case segContent:
		a.text(DeltaContent, s.text)
	case segReasoning:
		a.text(DeltaReasoning, s.text)
	case segWasReasoning:
		// The content so far was already passed to onDelta as content; it
		// cannot be taken back there, but the Response gets it right.
		moved := a.content.String()
		a.content.Reset()
		if a.guard != nil {
			a.guard.reset()
		}
		if moved != "" {
			rest := a.reasoning.String()
			a.reasoning.Reset()
			a.reasoning.WriteString(moved)
			a.reasoning.WriteString(rest)
		}
	}
}

// text appends s to the content or the reasoning. Whitespace before the first
// visible character is dropped, since servers pad both sides of a think block
// with newlines.
func (a *assembler) text(kind DeltaKind, s string) {
	b := &a.content
	if kind == DeltaReasoning {
		b = &a.reasoning
	}
	if b.Len() == 0 {
		s = strings.TrimLeft(s, " \t\r\n")
	}
	if s == "" {
		return
	}
	b.WriteString(s)
	if kind == DeltaContent && a.guard != nil {
		s = a.guard.feed(s)
	}
	if a.onDelta != nil && s != "" {
		a.onDelta(Delta{Kind: kind, Text: s})
	}
}

// mergeCall adds one streamed tool-call entry to the call it belongs to, or
// starts a new call.
func (a *assembler) mergeCall(tc *replyToolCall) {
	if c := a.target(tc); c != nil {
		c.merge(tc)
		return
	}
	a.calls = append(a.calls, newCall(tc))
}

func newCall(tc *replyToolCall) *callBuilder {
	c := new(callBuilder)
	c.merge(tc)
	return c
}

func (c *callBuilder) merge(tc *replyToolCall) {
	if tc.Index != nil && !c.hasIndex {
		c.index, c.hasIndex = *tc.Index, true
	}
	// Servers send id and name on a call's first entry only, and "" or
	// nothing after: never overwrite a known one.
	if c.id == "" {
		c.id = string(tc.ID)
	}
	if c.name == "" {
		c.name = string(tc.Function.Name)
	}
	c.args.WriteString(string(tc.Function.Arguments))
}

// target finds the call a streamed entry continues, or returns nil when it
// starts a new one. The index alone cannot be trusted: Ollama has omitted it,
// and has sent 0 for every one of several parallel calls.
func (a *assembler) target(tc *replyToolCall) *callBuilder {
	if id := string(tc.ID); id != "" {
		for _, c := range a.calls {
			if c.id == id {
				return c
			}
		}
		// A new id starts a new call, unless the entry has no name: a call's
		// first entry always names the function, so a nameless entry with a
		// fresh id is a server re-issuing ids mid-call.
		if tc.Function.Name != "" {
			return nil
		}
	}
	c := a.lastCall()
	if tc.Index != nil {
		c = a.callAt(*tc.Index)
	}
	if c == nil {
		return nil
	}
	// Without ids, a name arriving for a call whose arguments are already
	// complete can only be the next call (ids missing and index 0 for all).
	if tc.Function.Name != "" && c.name != "" && c.complete() {
		return nil
	}
	return c
}

func (a *assembler) lastCall() *callBuilder {
	if len(a.calls) == 0 {
		return nil
	}
	return a.calls[len(a.calls)-1]
}

// callAt returns the latest call with index i: when a server gives every call
// index 0, the latest one is the call in progress.
func (a *assembler) callAt(i int) *callBuilder {
	for j := len(a.calls) - 1; j >= 0; j-- {
		if c := a.calls[j]; c.hasIndex && c.index == i {
			return c
		}
	}
	return nil
}

// complete reports whether the arguments so far already form a JSON value.
func (c *callBuilder) complete() bool {
	args := strings.TrimSpace(c.args.String())
	return args != "" && json.Valid([]byte(args))
}

// response finishes the reply and returns it normalized.
func (a *assembler) response() Response {
	a.think.flush(a.segment)
	r := Response{
		Content:      strings.TrimRight(a.content.String(), " \t\r\n"),
		Reasoning:    strings.TrimRight(a.reasoning.String(), " \t\r\n"),
		FinishReason: a.finish,
		Usage:        a.usage,
	}
	for _, c := range a.calls {
		if c.name == "" && c.args.Len() == 0 {
			continue
		}
		call := ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()}
		if call.ID == "" {
			call.ID = newCallID()
		}
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, call)
	}
	if r.Usage.TotalTokens == 0 {
		r.Usage.TotalTokens = r.Usage.PromptTokens + r.Usage.CompletionTokens
	}
	if r.FinishReason == "" {
		r.FinishReason = "stop"
		if len(r.ToolCalls) > 0 {
			r.FinishReason = "tool_calls"
		}
	}
	// A whole answer that arrived only as reasoning is still the answer
	// (see the package doc). A reply cut off by the length limit is not: its
	// reasoning is an unfinished thought.
	if r.Content == "" && len(r.ToolCalls) == 0 && r.Reasoning != "" && r.FinishReason != "length" {
		r.Content, r.Reasoning = r.Reasoning, ""
		r.ReasoningAsAnswer = true
	}
	return r
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newCallID makes an id for a call the server sent without one. It ends in
// nine alphanumerics because Mistral templates accept only those, and vLLM
// keeps the last nine characters of longer ids for them.
func newCallID() string {
	b := make([]byte, 9)
	for i := range b {
		b[i] = idChars[rand.IntN(len(idChars))]
	}
	return "call_" + string(b)
}
