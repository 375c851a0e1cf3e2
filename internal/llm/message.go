package llm

import "encoding/json"

// Roles of a chat message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of the conversation, already normalized: Content never
// holds reasoning or <think> blocks, and every tool call has an id, a name
// and arguments that are a JSON text ("{}" when the model sent none).
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Written is an assistant message as the model wrote it, call markup
	// included, when its ToolCalls were recovered from that text rather
	// than sent by the server. It goes back in place of Content and
	// ToolCalls, and the calls' results go back as user messages: the
	// model sees its own format, and a server without a parser for that
	// format is never sent tool calls it cannot render.
	Written string `json:"written,omitempty"`
	// Reasoning goes back with an assistant message only when set, which
	// the caller does only for models that need their earlier reasoning
	// between tool calls (gpt-oss).
	Reasoning string `json:"reasoning,omitempty"`
	// Images go with a user message to a model that takes them, as data
	// URLs (data:image/png;base64,...), after its text.
	Images []string `json:"images,omitempty"`
}

// ToolCall is one function call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the text the model sent, normalized to a JSON text where
	// it arrived as an object, or as the code tool's source itself. It may
	// still be invalid JSON: the model wrote it, and the caller answers such
	// a call with an error the model can read.
	Arguments string `json:"arguments"`
}

// Tool describes one function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// Request is one chat completion request.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
	// Dialect says how tool calls travel; the zero value is DialectAuto.
	Dialect Dialect
	// CodeTool names a tool that takes {"code": "<source>"}. Code a model
	// writes where a call belongs (Llama's <|python_tag|> followed by
	// code, and with FencedCode a ```python block) becomes a call to it,
	// and so do gpt-oss's calls to the python tool it was trained on,
	// when no tool of that name is offered. A call to it whose arguments
	// are the source itself gets them as {"code": source}.
	CodeTool string
	// FencedCode makes a ```python block in a reply without other calls a
	// call to CodeTool, for models that never call tools. Such a reply's
	// answer then ends only when the model writes no code.
	FencedCode bool
	// Sampling are the client's sampling settings; its zero value leaves
	// every one to the server.
	Sampling Sampling
}

// Sampling are the settings of a model's sampling a client may give; nil
// and zero leave each to the server's default.
type Sampling struct {
	Temperature *float64
	TopP        *float64
	// MaxTokens bounds the tokens of one reply (max_tokens, which every
	// OpenAI-compatible server takes).
	MaxTokens int
	Stop      []string
	Seed      *int
}

// Usage counts tokens as the server reported them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
	}
}

// Response is the model's whole reply to one Request.
type Response struct {
	// Content is the answer text with any <think> block removed.
	Content string
	// Reasoning gathers reasoning_content, reasoning and <think> text. It is
	// shown to the user but never sent back to the model.
	Reasoning    string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
	// ReasoningAsAnswer is set when the reply had no content and no tool
	// calls, only reasoning, and that reasoning was moved to Content as the
	// answer (Reasoning is then empty). Its text was streamed as
	// DeltaReasoning, so a display may want to show Content again.
	ReasoningAsAnswer bool
	// CallFormat names the text format ToolCalls were recovered from
	// (FormatHermes, FormatMistral, ...); it is empty when the server sent
	// them as tool calls, or when there are none.
	CallFormat string
	// Written is the content as the model wrote it, call markup included,
	// when CallFormat is set; Content then holds the rest of the text. It
	// is empty for a call written inside reasoning that never ended, whose
	// rest stays reasoning.
	Written string
}

// Message is the reply as it goes into the conversation's history, for the
// next request: the answer and the calls, or the model's own text where its
// calls were recovered from it. Reasoning is left out; a caller that sends
// it back sets it. A call that came as the legacy function_call field goes
// back as a tool call with the id terp gave it: servers that still send the
// old field accept tool_calls in a request, and the tool message needs an
// id to answer.
func (r Response) Message() Message {
	return Message{Role: RoleAssistant, Content: r.Content, ToolCalls: r.ToolCalls, Written: r.Written}
}

// DeltaKind tells what a streamed Delta carries.
type DeltaKind int

// Kinds of streamed text.
const (
	DeltaContent DeltaKind = iota
	DeltaReasoning
	// DeltaArguments is a piece of a tool call's arguments, the JSON text
	// as the model writes it, for a display that shows a call before it
	// is complete. It is neither answer nor reasoning. The code tool's
	// raw source comes as the JSON text it becomes in the Response, so
	// that the pieces joined are the call's arguments.
	DeltaArguments
)

// Delta is a piece of streamed text, passed to the caller as it arrives.
type Delta struct {
	Kind DeltaKind
	Text string
	// Index, ID and Name say which call a DeltaArguments piece belongs
	// to: Index is its place in Response.ToolCalls, and ID and Name are
	// the id and the name it has there, fixed when its first piece is
	// reported (the id made up then if the server has sent none yet).
	// Name is empty while unknown.
	Index    int
	ID, Name string
}
