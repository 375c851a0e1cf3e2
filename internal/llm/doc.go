// Package llm talks to OpenAI-compatible chat servers (vLLM, SGLang, Ollama,
// llama.cpp, LM Studio, gpuOS) and hands the agent loop clean messages.
//
// Open-model servers deviate from the OpenAI wire format in many small ways:
// tool-call ids that are missing, shared or repeated, indexes that are
// missing or repeated, names split over deltas or restated in every one, a
// last delta that restates the whole call, arguments sent as JSON objects or
// encoded twice, characters cut between chunks, the legacy function_call
// field, reasoning in three different places, SSE events over several data
// lines or with no blank line between them, errors in odd shapes and odd
// places (a 200 whose body is an error), and what gpt-oss's harmony format
// leaves in names and arguments (a "functions." namespace, control tokens,
// its built-in python tool called with raw source). This package absorbs
// all of them, so that the rest of terp never has to know which server it
// talks to; a call's name is only ever changed into a tool the request
// offers. Each shape is a recorded reply in testdata/replies, with the
// server and the issue it comes from: adding a server's quirk is adding a
// file there.
//
// Requests are built from go-openai's request types, so the body is what the
// OpenAI SDKs send. Replies are decoded here, streamed or not, into structs
// that accept every variant: go-openai's response types have no `reasoning`
// field and fail on arguments sent as an object, and its stream reader
// silently skips llama.cpp's bare `error:` lines and error payloads it cannot
// parse. Both kinds of reply go through the same decoder and the same
// assembler, so a whole reply is normalized exactly like a streamed one, and
// a server that ignores the `stream` flag is still understood.
//
// Transient failures (connection errors, 429, 502, 503, 504, and a 500 that
// names no lasting problem) are retried by a wrapper around the
// http.Client's transport, which sees the Retry-After header. A reply that
// breaks off before its finish_reason is asked for again by Complete, from
// the same budget: a request runs no tools, so sending it again is safe,
// and the deltas of the new reply skip the text the broken one showed.
//
// When the server has no parser for a model's tool-call format, the calls
// arrive as text in the content. With Request.Dialect auto or text they are
// recovered (Hermes, fenced JSON, Mistral, Llama, Qwen XML and, with
// Request.FencedCode, ```python blocks), given ids and cut from the answer;
// while streaming, content that may be such a call is held back from the
// deltas. With DialectText no tools are sent and the history is rewritten as
// plain text (see textForm), which every chat template renders.
//
// One choice the caller must know about: a reply whose whole answer arrived as
// reasoning (content null, no tool calls, as vLLM's reasoning parsers produce
// when a model never closes its think block) is returned with that text as
// Content and Response.ReasoningAsAnswer set, because dropping it would leave
// the user with no answer at all.
package llm
