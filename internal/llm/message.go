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
}

// ToolCall is one function call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the text the model sent, normalized to a JSON text where
	// it arrived as an object. It may still be invalid JSON: the model wrote
	// it, and the caller answers such a call with an error the model can read.
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
}

// DeltaKind tells what a streamed Delta carries.
type DeltaKind int

// Kinds of streamed text.
const (
	DeltaContent DeltaKind = iota
	DeltaReasoning
)

// Delta is a piece of streamed text, passed to the caller as it arrives.
type Delta struct {
	Kind DeltaKind
	Text string
}
