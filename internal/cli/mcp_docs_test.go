package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/config"
)

// mcpDocs is the document whose client snippets users copy.
const mcpDocs = "../../docs/mcp.md"

// TestMCPClientSnippets keeps the configuration snippets of docs/mcp.md's
// Clients section honest: a snippet a user pastes must start terp mcp with
// flags it has, name real TERP_ variables, and point at the paths terp
// serves, so a renamed flag or a typo fails here instead of in a client.
// The clients themselves are not run.
func TestMCPClientSnippets(t *testing.T) {
	src, err := os.ReadFile(mcpDocs)
	if err != nil {
		t.Fatal(err)
	}
	blocks := clientBlocks(t, string(src))
	// Every client the section promises has at least one checked snippet.
	found := map[string]int{}
	for _, b := range blocks {
		n := checkSnippet(t, b)
		t.Logf("%s:%d (%s, %s): %d checked", mcpDocs, b.line, b.heading, b.lang, n)
		found[b.heading] += n
	}
	for _, client := range []string{"Claude Desktop", "VS Code", "Cursor", "Zed", "Goose", "vLLM"} {
		n := 0
		for heading, c := range found {
			if strings.HasPrefix(heading, client) {
				n += c
			}
		}
		if n == 0 {
			t.Errorf("no checked terp command or URL under a %q heading of the Clients section", client)
		}
	}
}

// docBlock is one fenced code block of the Clients section.
type docBlock struct {
	heading string // the ### heading it sits under, "" before the first
	lang    string
	line    int // of the opening fence, 1-based
	text    string
}

// clientBlocks returns the fenced blocks between "## Clients" and the next
// "## " heading.
func clientBlocks(t *testing.T, doc string) []docBlock {
	t.Helper()
	var blocks []docBlock
	var cur *docBlock
	in, heading := false, ""
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case cur != nil:
			if strings.HasPrefix(line, "```") {
				blocks = append(blocks, *cur)
				cur = nil
			} else {
				cur.text += line + "\n"
			}
		case strings.HasPrefix(line, "## "):
			in = line == "## Clients"
		case !in:
		case strings.HasPrefix(line, "### "):
			heading = strings.TrimPrefix(line, "### ")
		case strings.HasPrefix(line, "```"):
			cur = &docBlock{heading: heading, lang: strings.TrimPrefix(line, "```"), line: i + 1}
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no code blocks under ## Clients", mcpDocs)
	}
	return blocks
}

// checkSnippet checks one block and returns how many commands and URLs it
// checked.
func checkSnippet(t *testing.T, b docBlock) int {
	t.Helper()
	where := fmt.Sprintf("%s:%d (%s, %s)", mcpDocs, b.line, b.heading, b.lang)
	switch b.lang {
	case "json", "jsonc":
		var v any
		if err := json.Unmarshal([]byte(stripLineComments(b.text)), &v); err != nil {
			t.Errorf("%s: not JSON: %v", where, err)
			return 0
		}
		return checkServers(t, where, v)
	case "yaml":
		v, err := parseSimpleYAML(b.text)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return 0
		}
		return checkServers(t, where, v)
	case "sh":
		return checkShell(t, where, b.text)
	default:
		t.Errorf("%s: a block the test cannot check; give it a json, yaml or sh fence", where)
		return 0
	}
}

// checkServers walks a parsed configuration and checks every object that
// starts a command (command or Goose's cmd) or names a URL (url, or Goose's
// uri).
func checkServers(t *testing.T, where string, v any) int {
	t.Helper()
	n := 0
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			n += checkServers(t, where, e)
		}
	case map[string]any:
		for _, key := range []string{"command", "cmd"} {
			cmd, ok := v[key]
			if !ok {
				continue
			}
			name, ok := cmd.(string)
			if !ok {
				t.Errorf("%s: %q is %v, want the path of terp as a string", where, key, cmd)
				continue
			}
			var args []string
			if raw, ok := v["args"].([]any); ok {
				for _, a := range raw {
					s, ok := a.(string)
					if !ok {
						t.Errorf("%s: args %v: every argument must be a string", where, raw)
					}
					args = append(args, s)
				}
			} else {
				t.Errorf("%s: %s %q without an args list", where, key, name)
			}
			checkTerp(t, where, append([]string{name}, args...))
			for _, envKey := range []string{"env", "envs"} {
				if env, ok := v[envKey].(map[string]any); ok {
					for name := range env {
						checkEnv(t, where, name)
					}
				}
			}
			n++
		}
		for _, key := range []string{"url", "uri"} {
			u, ok := v[key].(string)
			if !ok {
				continue
			}
			checkURL(t, where, u, "/mcp")
			headers, _ := v["headers"].(map[string]any)
			if auth, _ := headers["Authorization"].(string); !strings.HasPrefix(auth, "Bearer ") {
				t.Errorf("%s: %s %s without an \"Authorization\": \"Bearer ...\" header; terp wants one whenever TERP_MCP_TOKEN is set", where, key, u)
			}
			n++
		}
		for _, e := range v {
			n += checkServers(t, where, e)
		}
	}
	return n
}

// checkShell checks the terp commands, the goose --with-extension commands
// and the URLs of a shell block. Words are split on blanks; the snippets
// quote only whole words.
func checkShell(t *testing.T, where, text string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(text, "\n") {
		words := strings.Fields(line)
		for len(words) > 0 && isAssignment(words[0]) {
			checkEnv(t, where, strings.SplitN(words[0], "=", 2)[0])
			// VAR=$(a command) spans words up to the closing parenthesis.
			if strings.Contains(words[0], "$(") {
				for len(words) > 1 && !strings.HasSuffix(words[0], ")") {
					words = words[1:]
				}
			}
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		if isTerp(words[0]) {
			checkTerp(t, where, words)
			n++
		}
		for i, w := range words {
			if i+1 == len(words) {
				break
			}
			arg := strings.Trim(words[i+1], `"'`)
			switch w {
			case "--with-extension":
				// "[name:]ENV=value command args...", quoted as one word.
				rest := strings.Fields(strings.Trim(strings.SplitN(line, "--with-extension ", 2)[1], `"'`))
				if len(rest) > 0 && !isAssignment(rest[0]) && strings.Contains(rest[0], ":") {
					rest[0] = rest[0][strings.Index(rest[0], ":")+1:]
				}
				for len(rest) > 0 && isAssignment(rest[0]) {
					checkEnv(t, where, strings.SplitN(rest[0], "=", 2)[0])
					rest = rest[1:]
				}
				checkTerp(t, where, rest)
				n++
			case "--with-streamable-http-extension":
				checkURL(t, where, arg, "/mcp")
				n++
			case "--tool-server":
				// vLLM takes HOST:PORT and adds /sse itself.
				checkURL(t, where, "http://"+arg+"/sse", "/sse")
				n++
			}
		}
	}
	return n
}

// checkTerp checks that argv runs terp mcp and that terp mcp parses its
// flags, with the command's own constructor.
func checkTerp(t *testing.T, where string, argv []string) {
	t.Helper()
	if len(argv) == 0 || !isTerp(argv[0]) {
		t.Errorf("%s: command %q, want terp (or an absolute path ending in /terp)", where, argv)
		return
	}
	if len(argv) < 2 || argv[1] != "mcp" {
		t.Errorf("%s: %q: the first argument must be mcp", where, argv)
		return
	}
	ran := false
	cmd := newCmdMCP(NewFactory(), func(context.Context, *mcpOptions) error { ran = true; return nil })
	cmd.SetArgs(argv[2:])
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(context.Background()); err != nil || !ran {
		t.Errorf("%s: terp %q does not parse: %v", where, argv[1:], err)
	}
}

func isTerp(name string) bool {
	return name == "terp" || strings.HasPrefix(name, "/") && strings.HasSuffix(name, "/terp")
}

var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

func isAssignment(word string) bool { return assignment.MatchString(word) }

// checkEnv checks that a TERP_ variable a snippet sets is one terp reads.
func checkEnv(t *testing.T, where, name string) {
	t.Helper()
	if !strings.HasPrefix(name, "TERP_") || name == mcpTokenEnv {
		return
	}
	if !slices.ContainsFunc(config.Keys(), func(k config.Key) bool { return k.Env == name }) {
		t.Errorf("%s: %s is not an environment variable terp reads", where, name)
	}
}

// checkURL checks that u is an http URL with the path terp serves that
// transport at.
func checkURL(t *testing.T, where, u, path string) {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
		t.Errorf("%s: %q is not an http URL (%v)", where, u, err)
		return
	}
	if p.Path != path {
		t.Errorf("%s: %s has path %q, want %s", where, u, p.Path, path)
	}
}

// stripLineComments drops // comments outside strings, for jsonc blocks.
func stripLineComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		inString := false
		for i := 0; i < len(line); i++ {
			switch {
			case line[i] == '\\' && inString:
				i++
			case line[i] == '"':
				inString = !inString
			case !inString && strings.HasPrefix(line[i:], "//"):
				line = line[:i]
			}
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// parseSimpleYAML reads the YAML subset the Goose snippet uses: nested block
// mappings by indentation, plain or quoted scalars, and flow values ([...]
// and {...}) written as JSON. go.mod has no YAML library, and one snippet
// does not justify adding it; anything outside the subset is an error, so
// the snippet cannot drift into YAML this check would misread.
func parseSimpleYAML(text string) (map[string]any, error) {
	root := map[string]any{}
	// Each frame is a mapping and the indentation of the key that owns it;
	// a line belongs to the innermost mapping whose key is less indented.
	type frame struct {
		indent int
		m      map[string]any
	}
	stack := []frame{{-1, root}}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, value, ok := strings.Cut(trimmed, ":")
		if !ok || strings.HasPrefix(key, "-") || strings.ContainsAny(key, " \"'") {
			return nil, fmt.Errorf("yaml line %d %q: only key: value mappings are checked", i+1, line)
		}
		for indent <= stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		parent := stack[len(stack)-1].m
		value = strings.TrimSpace(value)
		switch {
		case value == "":
			child := map[string]any{}
			parent[key] = child
			stack = append(stack, frame{indent, child})
		case strings.HasPrefix(value, "[") || strings.HasPrefix(value, "{") || strings.HasPrefix(value, `"`):
			var v any
			if err := json.Unmarshal([]byte(value), &v); err != nil {
				return nil, fmt.Errorf("yaml line %d %q: write flow values as JSON: %v", i+1, line, err)
			}
			parent[key] = v
		default:
			parent[key] = value
		}
	}
	return root, nil
}
