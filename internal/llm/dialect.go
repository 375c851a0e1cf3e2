package llm

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Dialect says how tool calls travel between terp and the model.
//
// Servers turn a model's tool-call text into OpenAI tool_calls only when
// they have a parser for the model's format, and refuse tools outright when
// tool calling is off (vLLM without --enable-auto-tool-choice, llama.cpp
// without --jinja, Ollama models whose template has no tools). Models then
// still write calls, in their own format, in the content. DialectAuto takes
// the server's calls when there are any and recovers the written ones when
// there are not; the caller falls back to DialectText when the server
// refuses tools.
type Dialect string

// Dialects.
const (
	// DialectAuto sends tools the OpenAI way and also recovers calls the
	// model wrote as text.
	DialectAuto Dialect = "auto"
	// DialectNative uses only the calls the server sends.
	DialectNative Dialect = "native"
	// DialectText sends no tools: the caller's system prompt tells the model
	// how to write a call, calls are recovered from the text, and the whole
	// history goes back as plain text (results as user messages), which
	// every chat template can render.
	DialectText Dialect = "text"
)

// Formats of tool calls written as text, as Response.CallFormat names them.
const (
	// FormatHermes is <tool_call>{"name":..,"arguments":{..}}</tool_call>
	// (Qwen, Hermes, many fine-tunes).
	FormatHermes = "hermes"
	// FormatQwenXML is <function=NAME><parameter=P>V</parameter></function>,
	// bare or inside <tool_call> (Qwen3-Coder).
	FormatQwenXML = "qwen-xml"
	// FormatMistral is [TOOL_CALLS][{"name":..,"arguments":..}], or
	// [TOOL_CALLS]NAME[ARGS]{..} in newer Mistral templates.
	FormatMistral = "mistral"
	// FormatLlama is <|python_start|>{"name":..,"parameters":{..}}<|python_end|>
	// (Llama 4) or <|python_tag|>... (Llama 3.1).
	FormatLlama = "llama"
	// FormatJSON is a call as a JSON object, fenced as ```json or bare.
	FormatJSON = "json"
	// FormatPython is a fenced ```python block taken as a call to the code
	// tool (Request.FencedCode).
	FormatPython = "python"
)

// recovery is what a reply's text may be recovered into.
type recovery struct {
	offer
	fenced bool
	// guard is the stream's callGuard, if any, whose held text dropEchoes
	// corrects.
	guard *callGuard
}

// newRecovery returns the recovery req asks for, or nil when calls written
// as text are not wanted (DialectNative, or no tools at all).
func newRecovery(req Request) *recovery {
	if req.Dialect == DialectNative || len(req.Tools) == 0 {
		return nil
	}
	o := newOffer(req)
	// A ```python block is a call only when there is a code tool to call.
	return &recovery{offer: o, fenced: req.FencedCode && o.codeTool != ""}
}

// apply recovers the calls written in r's content, when the server sent
// none: the calls become ToolCalls with synthesized ids, and the text they
// were written in is removed from Content.
func (rec *recovery) apply(r *Response) {
	if rec == nil || r.Content == "" {
		return
	}
	if len(r.ToolCalls) > 0 {
		rec.dropEchoes(r)
		return
	}
	rest, calls, format := rec.parse(r.Content)
	if len(calls) == 0 {
		return
	}
	for i := range calls {
		calls[i].ID = newCallID()
		if strings.TrimSpace(calls[i].Arguments) == "" {
			calls[i].Arguments = "{}"
		}
	}
	r.ToolCalls = calls
	r.CallFormat = format
	if r.ReasoningAsAnswer {
		// The call was written inside reasoning that never ended: the rest
		// is reasoning, and is no more sent back than any other.
		r.Reasoning, r.Content = rest, ""
		r.ReasoningAsAnswer = false
	} else {
		r.Written = r.Content
		r.Content = rest
	}
	if r.FinishReason == "stop" {
		r.FinishReason = "tool_calls"
	}
}

// dropEchoes cuts from r's content the calls it writes out that the server
// also sent as tool calls: a server whose parser passes the model's text on
// (LocalAI's vLLM backend, vLLM's gpt-oss parser before 0.10.2) sends the
// same call twice, and sending both back shows the model two calls where it
// made one. Text that holds any other call is left as it is, and so is a
// ```python block: a model that shows the code it then calls is writing
// prose, not call markup.
func (rec *recovery) dropEchoes(r *Response) {
	rest, calls, format := rec.parse(r.Content)
	if len(calls) == 0 || format == FormatPython || !echoes(calls, r.ToolCalls) {
		return
	}
	r.Content = rest
	if rec.guard != nil {
		// The markup was held back from the deltas; what follows it was
		// held with it and is shown when the reply ends.
		held, heldCalls, heldFormat := rec.parse(rec.guard.pending + rec.guard.held.String())
		if len(heldCalls) > 0 && heldFormat != FormatPython {
			rec.guard.reset()
			rec.guard.held.WriteString(held)
		}
	}
}

// echoes reports whether every call written in the text is one of the calls
// the server sent: the same function with the same arguments.
func echoes(written, sent []ToolCall) bool {
	for _, w := range written {
		if !slices.ContainsFunc(sent, func(s ToolCall) bool { return sameCall(w, s) }) {
			return false
		}
	}
	return true
}

// span is text to cut from a reply, with the calls it holds (none for the
// later blocks of code that one call joins).
type span struct {
	start, end int
	calls      []ToolCall
}

// parse finds the calls written in content, trying each format in turn: a
// model writes its calls in one format per reply. It returns the content
// without them.
func (rec *recovery) parse(content string) (rest string, calls []ToolCall, format string) {
	type finder struct {
		format string
		find   func(string) []span
	}
	finders := []finder{
		{FormatHermes, rec.hermes},
		{FormatMistral, rec.mistral},
		{FormatLlama, rec.llama},
		{FormatQwenXML, qwenXMLSpans},
		{FormatJSON, rec.jsonCalls},
	}
	if rec.fenced {
		finders = append(finders, finder{FormatPython, rec.pythonFences})
	}
	for _, f := range finders {
		spans := f.find(content)
		if len(spans) == 0 {
			continue
		}
		format = f.format
		if f.format == FormatHermes && isQwenXML(content[spans[0].start:spans[0].end]) {
			format = FormatQwenXML
		}
		var b strings.Builder
		last := 0
		for _, s := range spans {
			b.WriteString(content[last:s.start])
			b.WriteString("\n")
			last = s.end
			calls = append(calls, s.calls...)
		}
		b.WriteString(content[last:])
		// A call written as text is garbled the way a server's is (a model
		// writes the name it was trained on), and is put right the same way.
		for i := range calls {
			rec.normalize(&calls[i])
		}
		return tidy(b.String()), calls, format
	}
	return content, nil, ""
}

var blankLines = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\n{3,}`)
})

// tidy trims what is left of a reply once its calls are cut out.
func tidy(s string) string {
	return strings.TrimSpace(blankLines().ReplaceAllString(s, "\n\n"))
}

const (
	hermesOpen   = "<tool_call>"
	hermesClose  = "</tool_call>"
	qwenFunction = "<function="
)

func isQwenXML(s string) bool { return strings.Contains(s, qwenFunction) }

// hermes finds <tool_call> blocks. The closing tag may be missing when the
// server stopped at it.
func (rec *recovery) hermes(content string) []span {
	var spans []span
	for from := 0; ; {
		i := strings.Index(content[from:], hermesOpen)
		if i < 0 {
			return spans
		}
		start := from + i
		bodyStart := start + len(hermesOpen)
		end := len(content)
		bodyEnd := end
		if j := strings.Index(content[bodyStart:], hermesClose); j >= 0 {
			bodyEnd = bodyStart + j
			end = bodyEnd + len(hermesClose)
		} else if j := strings.Index(content[bodyStart:], hermesOpen); j >= 0 {
			bodyEnd, end = bodyStart+j, bodyStart+j
		}
		body := strings.TrimSpace(content[bodyStart:bodyEnd])
		s := span{start: start, end: end}
		if isQwenXML(body) {
			for _, q := range qwenXMLSpans(body) {
				s.calls = append(s.calls, q.calls...)
			}
		} else if calls := jsonCalls(body, nil); len(calls) > 0 {
			s.calls = calls
		} else if c, ok := brokenJSONCall(body); ok {
			s.calls = []ToolCall{c}
		}
		if len(s.calls) > 0 {
			spans = append(spans, s)
		}
		from = end
		if from >= len(content) {
			return spans
		}
	}
}

const mistralMarker = "[TOOL_CALLS]"

// mistral finds [TOOL_CALLS] followed by a JSON list of calls, or by
// NAME[ARGS]{...} (and NAME[CALL_ID]id[ARGS]{...}) in newer templates.
func (rec *recovery) mistral(content string) []span {
	var spans []span
	for from := 0; ; {
		i := strings.Index(content[from:], mistralMarker)
		if i < 0 {
			return spans
		}
		start := from + i
		p := start + len(mistralMarker)
		rest := strings.TrimLeft(content[p:], " \t\r\n")
		p = len(content) - len(rest)
		if rest != "" && (rest[0] == '[' || rest[0] == '{') {
			n, calls := decodeCalls(rest, nil)
			if n == 0 {
				if c, ok := brokenJSONCall(rest); ok {
					spans = append(spans, span{start: start, end: len(content), calls: []ToolCall{c}})
				}
				return spans
			}
			end := p + n
			spans = append(spans, span{start: start, end: end, calls: calls})
			from = end
			continue
		}
		// NAME[ARGS]{...}
		a := strings.Index(rest, "[ARGS]")
		if a < 0 {
			return spans
		}
		name := rest[:a]
		if k := strings.Index(name, "[CALL_ID]"); k >= 0 {
			name = name[:k]
		}
		name = strings.TrimSpace(name)
		argText := rest[a+len("[ARGS]"):]
		n := jsonValueLen(argText)
		end := len(content)
		args := strings.TrimSpace(argText)
		if n > 0 {
			end = p + a + len("[ARGS]") + n
			args = compactJSON(argText[:n])
		}
		if j := strings.Index(argText, mistralMarker); n == 0 && j >= 0 {
			end = p + a + len("[ARGS]") + j
			args = strings.TrimSpace(argText[:j])
		}
		if name != "" {
			spans = append(spans, span{start: start, end: end, calls: []ToolCall{{Name: name, Arguments: args}}})
		}
		from = end
	}
}

// Llama's markers: Llama 4 wraps a call in python_start/python_end; Llama
// 3.1 starts one with python_tag and ends it with eom_id (or the end).
var llamaMarkers = []struct{ open, close string }{
	{"<|python_start|>", "<|python_end|>"},
	{"<|python_tag|>", "<|eom_id|>"},
}

func (rec *recovery) llama(content string) []span {
	var spans []span
	for _, m := range llamaMarkers {
		for from := 0; ; {
			i := strings.Index(content[from:], m.open)
			if i < 0 {
				break
			}
			start := from + i
			bodyStart := start + len(m.open)
			bodyEnd, end := len(content), len(content)
			if j := strings.Index(content[bodyStart:], m.close); j >= 0 {
				bodyEnd, end = bodyStart+j, bodyStart+j+len(m.close)
			} else if j := strings.Index(content[bodyStart:], "<|eot_id|>"); j >= 0 {
				bodyEnd, end = bodyStart+j, bodyStart+j+len("<|eot_id|>")
			}
			body := strings.TrimSpace(content[bodyStart:bodyEnd])
			calls := jsonCalls(body, nil)
			if len(calls) == 0 {
				// Several calls separated by semicolons (Llama 3.2).
				for _, part := range strings.Split(body, ";") {
					c := jsonCalls(strings.TrimSpace(part), nil)
					if c == nil {
						calls = nil
						break
					}
					calls = append(calls, c...)
				}
			}
			if len(calls) == 0 {
				switch c, ok := brokenJSONCall(body); {
				case body == "":
				case rec.codeTool != "" && !strings.HasPrefix(body, "{"):
					// Llama 3.1's built-in code interpreter: plain code
					// after the tag.
					calls = []ToolCall{codeCall(rec.codeTool, body)}
				case ok:
					calls = []ToolCall{c}
				}
			}
			if len(calls) > 0 {
				spans = append(spans, span{start: start, end: end, calls: calls})
			}
			from = end
		}
		if len(spans) > 0 {
			return spans
		}
	}
	return nil
}

// qwenXMLSpans finds <function=NAME><parameter=P>V</parameter>...</function>.
// A parameter's value is text, written without escapes: code survives it
// better than JSON.
func qwenXMLSpans(content string) []span {
	var spans []span
	for from := 0; ; {
		i := strings.Index(content[from:], qwenFunction)
		if i < 0 {
			return spans
		}
		start := from + i
		nameStart := start + len(qwenFunction)
		gt := strings.IndexByte(content[nameStart:], '>')
		if gt < 0 {
			return spans
		}
		name := strings.TrimSpace(content[nameStart : nameStart+gt])
		body := content[nameStart+gt+1:]
		end := len(content)
		if j := strings.Index(body, "</function>"); j >= 0 {
			end = nameStart + gt + 1 + j + len("</function>")
			body = body[:j]
		}
		params := map[string]string{}
		for {
			p := strings.Index(body, "<parameter=")
			if p < 0 {
				break
			}
			rest := body[p+len("<parameter="):]
			q := strings.IndexByte(rest, '>')
			if q < 0 {
				break
			}
			pname := strings.TrimSpace(rest[:q])
			val := rest[q+1:]
			next := len(val)
			if k := strings.Index(val, "</parameter>"); k >= 0 {
				next = k
			} else if k := strings.Index(val, "<parameter="); k >= 0 {
				next = k
			}
			v := val[:next]
			v = strings.TrimPrefix(v, "\n")
			v = strings.TrimSuffix(v, "\n")
			params[pname] = v
			body = strings.TrimPrefix(val[next:], "</parameter>")
		}
		args, _ := json.Marshal(params)
		if name != "" {
			spans = append(spans, span{start: start, end: end, calls: []ToolCall{{Name: name, Arguments: string(args)}}})
		}
		from = end
	}
}

// jsonCalls finds calls written as JSON: in ```json fences, or as the whole
// reply. Unlike the formats with markers, JSON is also how models show data,
// so only objects that name one of the request's tools count.
func (rec *recovery) jsonCalls(content string) []span {
	var spans []span
	for _, f := range fences(content) {
		lang := strings.ToLower(f.lang)
		if lang != "json" && lang != "" && lang != "tool_call" && lang != "tool_code" {
			continue
		}
		if calls := jsonCalls(strings.TrimSpace(f.body), rec.tools); len(calls) > 0 {
			spans = append(spans, span{start: f.start, end: f.end, calls: calls})
		}
	}
	if len(spans) > 0 {
		return spans
	}
	trimmed := strings.TrimSpace(content)
	if trimmed != "" && (trimmed[0] == '{' || trimmed[0] == '[') {
		off := strings.Index(content, trimmed)
		if calls := jsonCalls(trimmed, rec.tools); len(calls) > 0 {
			spans = append(spans, span{start: off, end: off + len(trimmed), calls: calls})
		}
	}
	return spans
}

// pythonFences takes the reply's ```python blocks as one call to the code
// tool, in the order written.
func (rec *recovery) pythonFences(content string) []span {
	var spans []span
	var code []string
	for _, f := range fences(content) {
		switch strings.ToLower(f.lang) {
		case "python", "py", "python3":
			if strings.TrimSpace(f.body) == "" {
				continue
			}
			code = append(code, strings.TrimRight(f.body, "\n"))
			spans = append(spans, span{start: f.start, end: f.end})
		}
	}
	if len(spans) == 0 {
		return nil
	}
	// The blocks are one call, so that code split over several blocks
	// runs as written even where variables do not survive between calls.
	spans[0].calls = []ToolCall{codeCall(rec.codeTool, strings.Join(code, "\n\n"))}
	return spans
}

func codeCall(tool, code string) ToolCall {
	return ToolCall{Name: tool, Arguments: codeArguments(code)}
}

// fence is one fenced block of Markdown, with the span it covers.
type fence struct {
	start, end int
	lang, body string
}

// fences finds the fenced blocks of content. A block left open at the end
// (the model stopped early) runs to the end.
func fences(content string) []fence {
	var out []fence
	var cur *fence
	var body strings.Builder
	pos := 0
	for pos < len(content) {
		nl := strings.IndexByte(content[pos:], '\n')
		lineEnd, next := len(content), len(content)
		if nl >= 0 {
			lineEnd, next = pos+nl, pos+nl+1
		}
		line := content[pos:lineEnd]
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(strings.TrimLeft(line, " "), "```") && len(line)-len(strings.TrimLeft(line, " ")) <= 3:
			cur = &fence{start: pos, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.end = lineEnd
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteString("\n")
		}
		pos = next
	}
	if cur != nil {
		cur.end = len(content)
		cur.body = body.String()
		out = append(out, *cur)
	}
	return out
}

// jsonCalls decodes text that is exactly one call, or a list of calls. With
// known set, every call must name one of those tools.
func jsonCalls(text string, known map[string]bool) []ToolCall {
	n, calls := decodeCalls(text, known)
	if n == 0 || strings.TrimSpace(text[n:]) != "" {
		return nil
	}
	return calls
}

// wireCall is a call as models write it: OpenAI's function object, or
// arguments (parameters in Llama's format) next to the name.
type wireCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	Function   *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func (w wireCall) call() (ToolCall, bool) {
	name, args := w.Name, w.Arguments
	if w.Function != nil && name == "" {
		name, args = w.Function.Name, w.Function.Arguments
	}
	if len(args) == 0 {
		args = w.Parameters
	}
	if name == "" {
		return ToolCall{}, false
	}
	return ToolCall{Name: name, Arguments: argumentsText(args)}, true
}

// argumentsText turns arguments written as an object, or as a string that
// holds JSON, into a JSON text.
func argumentsText(raw json.RawMessage) string {
	if !present(raw) {
		return "{}"
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compactJSON(string(raw))
}

func compactJSON(s string) string {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(s)) != nil {
		return strings.TrimSpace(s)
	}
	return buf.String()
}

// decodeCalls decodes the JSON value at the start of text as a call or a
// list of calls and returns how many bytes it took; 0 when it is neither.
// Raw newlines inside strings (code written straight into JSON) are
// escaped first, a mistake models make all the time.
func decodeCalls(text string, known map[string]bool) (int, []ToolCall) {
	n := jsonValueLen(text)
	if n == 0 {
		return 0, nil
	}
	raw := []byte(repairJSON(text[:n]))
	var calls []ToolCall
	var list []wireCall
	var one wireCall
	switch {
	case raw[0] == '[' && json.Unmarshal(raw, &list) == nil:
	case raw[0] == '{' && json.Unmarshal(raw, &one) == nil:
		list = []wireCall{one}
	default:
		return 0, nil
	}
	for _, w := range list {
		c, ok := w.call()
		if !ok || (known != nil && !known[c.Name]) {
			return 0, nil
		}
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		return 0, nil
	}
	return n, calls
}

// jsonValueLen returns the length of the JSON object or array at the start
// of s, found by matching brackets outside strings, or 0 when it does not
// close. Strings may hold raw newlines: the caller repairs those.
func jsonValueLen(s string) int {
	trimmed := strings.TrimLeft(s, " \t\r\n")
	lead := len(s) - len(trimmed)
	if trimmed == "" || (trimmed[0] != '{' && trimmed[0] != '[') {
		return 0
	}
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(trimmed); i++ {
		ch := trimmed[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && ch == '\\':
			escaped = true
		case inString && ch == '"':
			inString = false
		case inString:
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
			if depth == 0 {
				return lead + i + 1
			}
		}
	}
	return 0
}

// repairJSON escapes raw control characters inside JSON strings.
func repairJSON(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	var b strings.Builder
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && ch == '\\':
			escaped = true
		case inString && ch == '"':
			inString = false
		case inString && ch == '\n':
			b.WriteString(`\n`)
			continue
		case inString && ch == '\r':
			b.WriteString(`\r`)
			continue
		case inString && ch == '\t':
			b.WriteString(`\t`)
			continue
		case !inString && ch == '"':
			inString = true
		}
		b.WriteByte(ch)
	}
	return b.String()
}

var nameField = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`"name"\s*:\s*"([^"]+)"`)
})

// brokenJSONCall salvages a call whose JSON cannot be read: the name, and
// the text as its arguments, so the caller can tell the model what was
// wrong and it can try again.
func brokenJSONCall(body string) (ToolCall, bool) {
	m := nameField().FindStringSubmatch(body)
	if m == nil {
		return ToolCall{}, false
	}
	args := body
	if i := strings.Index(body, `"arguments"`); i >= 0 {
		args = strings.TrimLeft(body[i+len(`"arguments"`):], " \t\r\n:")
	} else if i := strings.Index(body, `"parameters"`); i >= 0 {
		args = strings.TrimLeft(body[i+len(`"parameters"`):], " \t\r\n:")
	}
	args = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(args), "}"))
	return ToolCall{Name: m[1], Arguments: args}, true
}
