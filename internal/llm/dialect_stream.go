package llm

import "strings"

// callMarkers begin a tool call written as text. Streamed content is held
// back from the first of them, so that a display does not show call markup
// as the answer; if no call is recovered after all, the held text is passed
// on at the end.
var callMarkers = []string{hermesOpen, mistralMarker, "<|python_start|>", "<|python_tag|>", qwenFunction, "```json"}

// codeMarker begins a fenced block of code, a call when Request.FencedCode
// is set. It covers ```python, ```py and ```python3.
const codeMarker = "```py"

// callGuard holds back streamed content that may be a tool call written as
// text. Content that starts with a bracket is held whole: it may be a call
// written as bare JSON.
type callGuard struct {
	markers []string
	started bool
	holding bool
	// pending is a tail that may be the beginning of a marker.
	pending string
	held    strings.Builder
}

func newCallGuard(rec *recovery) *callGuard {
	g := &callGuard{markers: callMarkers}
	if rec.fenced {
		g.markers = append(append([]string(nil), callMarkers...), codeMarker)
	}
	rec.guard = g
	return g
}

// feed takes the next piece of content and returns what may be shown now.
func (g *callGuard) feed(s string) string {
	if g.holding {
		g.held.WriteString(s)
		return ""
	}
	buf := g.pending + s
	g.pending = ""
	if !g.started {
		t := strings.TrimLeft(buf, " \t\r\n")
		if t == "" {
			return buf
		}
		g.started = true
		if t[0] == '{' || t[0] == '[' {
			g.holding = true
			g.held.WriteString(buf)
			return ""
		}
	}
	first := -1
	for _, m := range g.markers {
		if i := strings.Index(buf, m); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		g.holding = true
		g.held.WriteString(buf[first:])
		return buf[:first]
	}
	keep := 0
	for _, m := range g.markers {
		keep = max(keep, partialSuffix(buf, m))
	}
	g.pending = buf[len(buf)-keep:]
	return buf[:len(buf)-keep]
}

// release returns everything held back, for a reply that held no call.
func (g *callGuard) release() string {
	s := g.pending + g.held.String()
	g.reset()
	return s
}

// reset forgets what was held: the content seen so far turned out to be
// reasoning.
func (g *callGuard) reset() {
	g.pending, g.started, g.holding = "", false, false
	g.held.Reset()
}
