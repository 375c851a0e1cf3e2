package llm

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
)

// assembler builds one normalized Response out of the pieces of a reply,
// whatever server sent them: every quirk of QUIRKS.md is resolved here, once,
// for streamed and whole replies alike.
type assembler struct {
	// onDelta, when set, receives text as it is assembled.
	onDelta func(Delta)
	// offer is what the request offered, which the calls' names and
	// arguments are normalized against.
	offer offer
	// used are the ids of the calls already in the request's history.
	used map[string]bool

	think thinkSplitter
	// guard, when set, holds back content that may be a tool call written
	// as text (see callGuard).
	guard     *callGuard
	content   strings.Builder
	reasoning strings.Builder
	// contentText and reasoningText hold back a character cut between two
	// chunks until it is whole.
	contentText, reasoningText textDecoder
	calls                      []*callBuilder
	// legacy is the call a stream sends as function_call deltas.
	legacy *callBuilder
	finish string
	usage  Usage
}

// callBuilder is one tool call while its pieces arrive.
type callBuilder struct {
	index    int
	hasIndex bool
	id, name string
	// tool is the name normalized (see offer.name), fixed with the id
	// when the first piece of the arguments is reported: a name is
	// complete before its arguments start.
	tool string
	// args are the pieces of the arguments joined as they came, still
	// escaped: they are decoded once the call is complete, so that a
	// character cut between two pieces comes out whole.
	args []byte
	// argText decodes the pieces for onDelta, which needs whole characters
	// too; shown is set once a piece was reported, and the id fixed.
	argText textDecoder
	shown   bool
	// decided is set once the pieces tell whether the arguments are the
	// code tool's raw source (see isSource), and source when they are;
	// lead holds the blank pieces before the first that tells.
	decided, source bool
	lead            string
	// hidden is set for a stream's function_call that starts beside tool
	// calls: it is most likely one of them again (see response), and
	// showing its pieces would show that call twice.
	hidden bool
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
			if r := m.reasoningText(); len(r) > 0 {
				a.text(DeltaReasoning, a.reasoningText.decode(r))
			}
			if len(m.Content) > 0 {
				if s := a.contentText.decode(m.Content); s != "" {
					a.think.feed(s, a.segment)
				}
			}
			for i := range m.ToolCalls {
				if whole {
					a.calls = append(a.calls, newCall(&m.ToolCalls[i]))
				} else {
					a.mergeCall(&m.ToolCalls[i])
				}
			}
			if m.FunctionCall != nil {
				a.mergeLegacy(m.FunctionCall, whole)
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
	c := a.target(tc)
	if c == nil {
		c = new(callBuilder)
		a.calls = append(a.calls, c)
	}
	a.mergeInto(c, tc)
}

// mergeInto merges a streamed entry into c and reports to onDelta what it
// added to the arguments: only that, so a restated call is not shown twice.
func (a *assembler) mergeInto(c *callBuilder, tc *replyToolCall) {
	n := len(c.args)
	c.merge(tc)
	if a.onDelta == nil || len(c.args) == n || c.hidden {
		return
	}
	if !c.shown {
		// The display keys the call by its id, so the id is the one the
		// Response will carry from the first piece on: made up now when
		// the server sent none or one an earlier call has.
		c.shown = true
		if c.id == "" || a.idTaken(c) {
			c.id = newCallID()
		}
		c.tool = a.offer.name(c.name)
	}
	if text := a.shownArguments(c, c.argText.decode(c.args[n:])); text != "" {
		a.onDelta(Delta{Kind: DeltaArguments, Text: text, Index: a.position(c), ID: c.id, Name: c.tool})
	}
}

// shownArguments returns a decoded piece of c's arguments as onDelta gets
// it: as it came, or, for the code tool's raw source, as the JSON text the
// Response's arguments make of it. The pieces joined are then the arguments
// either way, and a display that reads the code out of them shows gpt-oss's
// code as it streams too. The closing quote and brace come when the reply
// ends (see response).
func (a *assembler) shownArguments(c *callBuilder, text string) string {
	switch {
	case text == "":
		return ""
	case c.decided && c.source:
		return codeText(text)
	case c.decided || !a.offer.isCode(c.tool):
		c.decided = true
		return text
	}
	text, c.lead = c.lead+text, ""
	if strings.TrimLeft(text, " \t\r\n") == "" {
		c.lead = text
		return ""
	}
	c.decided, c.source = true, isSource(text)
	if c.source {
		return codeOpen + codeText(text)
	}
	return text
}

// idTaken reports whether another call already has c's id.
func (a *assembler) idTaken(c *callBuilder) bool {
	if a.used[c.id] {
		return true
	}
	for _, o := range a.calls {
		if o != c && o.id == c.id {
			return true
		}
	}
	return false
}

// position is c's index in Response.ToolCalls, which leaves out calls with
// neither name nor arguments.
func (a *assembler) position(c *callBuilder) int {
	i := 0
	for _, o := range a.calls {
		if o == c {
			break
		}
		if o.name != "" || len(o.args) > 0 {
			i++
		}
	}
	return i
}

// mergeLegacy adds a function_call, the one call of the legacy API: a
// whole reply's is complete, a stream's continues over its deltas, which
// carry neither id nor index.
func (a *assembler) mergeLegacy(f *replyFunction, whole bool) {
	tc := replyToolCall{Function: *f}
	if whole {
		a.legacy = newCall(&tc)
		a.calls = append(a.calls, a.legacy)
		return
	}
	if a.legacy == nil {
		// llama-cpp-python sends each delta's function_call after its
		// tool_calls, so a repeat starts once the tool call has.
		a.legacy = &callBuilder{hidden: len(a.calls) > 0}
		a.calls = append(a.calls, a.legacy)
	}
	a.mergeInto(a.legacy, &tc)
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
	c.mergeName(string(tc.Function.Name))
	args := tc.Function.Arguments
	if len(args) > 0 && !c.restates(args) {
		c.args = append(c.args, args...)
	}
}

// mergeName adds a name piece. Most servers send the name once; Gemini and
// LM Studio cut it in pieces ("run_", then "python"), which are joined;
// MiniMax on NIM and Fireworks repeat the whole name on every delta, which
// must not double it. A piece equal to the whole name so far is taken for a
// repeat, and so is any name once the arguments have begun: a name is
// complete before its arguments start.
func (c *callBuilder) mergeName(name string) {
	switch {
	case name == "" || name == c.name || len(c.args) > 0:
	case c.name == "" || strings.HasPrefix(name, c.name):
		// The first piece, or a name restated as it grows.
		c.name = name
	default:
		c.name += name
	}
}

// restates reports whether args, the arguments of a new entry, are the
// call's whole arguments again: some servers end a call with a delta that
// restates it, and appending would glue two JSON objects together.
func (c *callBuilder) restates(args []byte) bool {
	// Only a whole JSON value can restate a complete one: a piece that
	// merely equals the text so far ("{" after "{") is appended.
	if t := bytes.TrimLeft(args, " "); len(t) == 0 || (t[0] != '{' && t[0] != '[') || !c.mayBeComplete() {
		return false
	}
	return bytes.Equal(args, c.args) || sameJSON(decodeText(c.args), decodeText(args))
}

// sameJSON reports whether a and b are the same JSON value, however they are
// spaced or escaped.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// target finds the call a streamed entry continues, or returns nil when it
// starts a new one. The index alone cannot be trusted: Ollama has omitted it,
// and has sent 0 for every one of several parallel calls. Nor can the id:
// Xinference gives every call of a reply the same one, and only the index
// tells them apart.
func (a *assembler) target(tc *replyToolCall) *callBuilder {
	if id := string(tc.ID); id != "" {
		for _, c := range a.calls {
			if c.id == id && (tc.Index == nil || !c.hasIndex || c.index == *tc.Index) {
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
	// complete can only be the next call (ids missing and index 0 for all),
	// unless it restates this one: the same name with no arguments, or the
	// same arguments again.
	if name := string(tc.Function.Name); name != "" && c.name != "" && c.complete() {
		args := tc.Function.Arguments
		if name != c.name || (len(args) > 0 && !c.restates(args)) {
			return nil
		}
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

// mayBeComplete is a cheap test that the arguments may already be a JSON
// value: they end in a closing bracket. It spares decoding them on every
// delta of a server that repeats the name on each one.
func (c *callBuilder) mayBeComplete() bool {
	t := bytes.TrimRight(c.args, " ")
	return len(t) > 0 && (t[len(t)-1] == '}' || t[len(t)-1] == ']')
}

// complete reports whether the arguments so far already form a JSON value.
func (c *callBuilder) complete() bool {
	if !c.mayBeComplete() {
		return false
	}
	args := strings.TrimSpace(decodeText(c.args))
	return args != "" && json.Valid([]byte(args))
}

// response finishes the reply and returns it normalized.
func (a *assembler) response() Response {
	a.text(DeltaReasoning, a.reasoningText.flush())
	if rest := a.contentText.flush(); rest != "" {
		a.think.feed(rest, a.segment)
	}
	a.think.flush(a.segment)
	r := Response{
		Content:      strings.TrimRight(a.content.String(), " \t\r\n"),
		Reasoning:    strings.TrimRight(a.reasoning.String(), " \t\r\n"),
		FinishReason: a.finish,
		Usage:        a.usage,
	}
	for _, c := range a.calls {
		if c.source && a.onDelta != nil {
			a.onDelta(Delta{Kind: DeltaArguments, Text: codeClose, Index: a.position(c), ID: c.id, Name: c.tool})
		}
	}
	seen := maps.Clone(a.used)
	if seen == nil {
		seen = make(map[string]bool, len(a.calls))
	}
	legacy := -1 // the function_call's place in r.ToolCalls
	for _, c := range a.calls {
		if c.name == "" && len(c.args) == 0 {
			continue
		}
		if c == a.legacy {
			legacy = len(r.ToolCalls)
		}
		call := ToolCall{ID: c.id, Name: c.name, Arguments: unwrapArguments(decodeText(c.args))}
		a.offer.normalize(&call)
		// Each call needs an id of its own: the tool messages answer calls
		// by id, and servers reject a history where two calls share one.
		// That holds across turns too, where servers whose ids count the
		// calls of a reply (SGLang's "0", "1", as InternLM/lmdeploy#3412
		// shows) and Mistral models, which
		// write their own ids and write the same one for the same call
		// again (NousResearch/hermes-agent#11722), repeat an earlier one.
		if call.ID == "" || seen[call.ID] {
			call.ID = newCallID()
		}
		seen[call.ID] = true
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		r.ToolCalls = append(r.ToolCalls, call)
	}
	if legacy >= 0 && repeats(r.ToolCalls, legacy) {
		// Servers that send the legacy field beside tool_calls repeat one
		// of the calls in it (llama-cpp-python's functionary handler, and
		// its handlers for a tool_choice that names a function): run it
		// once.
		r.ToolCalls = slices.Delete(r.ToolCalls, legacy, legacy+1)
	}
	if r.Usage.TotalTokens == 0 {
		r.Usage.TotalTokens = r.Usage.PromptTokens + r.Usage.CompletionTokens
	}
	if r.FinishReason == "function_call" && len(r.ToolCalls) > 0 {
		// The legacy API's reason for what is now a tool call.
		r.FinishReason = "tool_calls"
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

// callIDs returns the ids of the calls in msgs.
func callIDs(msgs []Message) map[string]bool {
	var ids map[string]bool
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if ids == nil {
				ids = make(map[string]bool)
			}
			ids[c.ID] = true
		}
	}
	return ids
}

// repeats reports whether the call at i is one of the others again.
func repeats(calls []ToolCall, i int) bool {
	for j, c := range calls {
		if j != i && sameCall(c, calls[i]) {
			return true
		}
	}
	return false
}

// sameCall reports whether a and b call the same function with the same
// arguments, however they are spaced or escaped.
func sameCall(a, b ToolCall) bool {
	return a.Name == b.Name && (a.Arguments == b.Arguments || sameJSON(a.Arguments, b.Arguments))
}

// offer is what a request offers the model: the tools its calls may name,
// and the one that takes code (Request.CodeTool, when it is among them).
// What servers do to names is undone against it, since a name is only ever
// changed into one the request offers.
type offer struct {
	tools    map[string]bool
	codeTool string
}

func newOffer(req Request) offer {
	o := offer{tools: make(map[string]bool, len(req.Tools))}
	for _, t := range req.Tools {
		o.tools[t.Name] = true
	}
	if o.tools[req.CodeTool] {
		o.codeTool = req.CodeTool
	}
	return o
}

const (
	// harmonyNamespace is where gpt-oss's harmony format puts the functions
	// a request offers: the model writes "to=functions.run_python", and a
	// server whose parser keeps the recipient whole passes that on as the
	// name (mlx-openai-server, which cut "function." instead, until
	// cubist38/mlx-openai-server#51).
	harmonyNamespace = "functions."
	// builtinPython is the tool gpt-oss was trained to call with raw
	// Python source ("to=python code<|message|>import pandas as pd..."),
	// which servers that know harmony's built-in tools pass on as a call
	// named python (mistral.rs's harmony parser).
	builtinPython = "python"
	// harmonyToken begins each of harmony's control tokens, which leak into
	// names: vLLM 0.13's openai tool parser streams
	// "query_dataset<|channel|>commentary" (vllm-project/vllm#32587), and
	// "<|constrain|>json" ends up in recipients (vllm-project/vllm#35906).
	harmonyToken = "<|"
)

// name returns the tool a call's name stands for: the name cut before any
// control token, without the harmony namespace when what follows it is
// offered, and the code tool for gpt-oss's built-in python when no tool of
// that name is offered. Anything else stays as it is, for the caller to
// answer as an unknown tool.
func (o offer) name(name string) string {
	if i := strings.Index(name, harmonyToken); i > 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	if o.tools[name] {
		return name
	}
	bare := strings.TrimPrefix(name, harmonyNamespace)
	switch {
	case o.tools[bare]:
		return bare
	case bare == builtinPython && o.codeTool != "":
		return o.codeTool
	}
	return name
}

// normalize puts right a call's name and arguments.
func (o offer) normalize(c *ToolCall) {
	c.Name = o.name(c.Name)
	if o.isCode(c.Name) && isSource(c.Arguments) {
		c.Arguments = codeArguments(c.Arguments)
	}
}

// isCode reports whether name is the code tool's, whose arguments may be
// the code itself.
func (o offer) isCode(name string) bool { return name != "" && name == o.codeTool }

// isSource reports whether a code tool's arguments are the source itself
// rather than JSON: gpt-oss writes its code raw, as harmony's python tool
// takes it, both to its built-in python and to a code tool it is offered
// (vLLM's openai tool parser passes a body that is not declared JSON on as
// it is), and servers hand that on as the arguments. Arguments that start
// like JSON, an object or a string, but do not parse are JSON the model
// broke, a string with raw newlines most often; they are left as they are,
// for the caller to tell the model what was wrong rather than run the
// pieces as Python. The first character decides, so that a stream can show
// the code as it comes (see shownArguments): what else is valid JSON, a
// list or a number, is a Python expression too.
func isSource(args string) bool {
	t := strings.TrimLeft(args, " \t\r\n")
	return t != "" && t[0] != '{' && t[0] != '"'
}

// codeArguments returns the arguments that carry code to the code tool.
func codeArguments(code string) string {
	return codeOpen + codeText(code) + codeClose
}

// codeOpen and codeClose are what codeArguments puts around the code, which
// the stream's pieces of source are shown between (see shownArguments).
const (
	codeOpen  = `{"code":"`
	codeClose = `"}`
)

// codeText returns s as the body of a JSON string. It leaves out the HTML
// escapes encoding/json adds by default: code is full of < and &, and chat
// templates that write a call's arguments into the prompt as they are would
// show the model \u003c where it wrote <. Each character is escaped on its
// own, so the text of the pieces of a string is the text of the whole.
func codeText(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	t := b.String()
	return t[1 : len(t)-2] // the quotes, and the newline Encode ends with
}

// unwrapArguments returns the object a double-encoded arguments text holds:
// some models and proxies (Qwen2.5 on vLLM and Ollama) send the arguments as
// a JSON string whose text is the JSON object, "\"{\\\"code\\\": ...}\"".
// Anything else is returned as it is.
func unwrapArguments(args string) string {
	t := strings.TrimSpace(args)
	if len(t) < 2 || t[0] != '"' {
		return args
	}
	var inner string
	if json.Unmarshal([]byte(t), &inner) != nil {
		return args
	}
	if in := strings.TrimSpace(inner); in != "" && in[0] == '{' && json.Valid([]byte(in)) {
		return inner
	}
	return args
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
