package openaiapi_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/terptest/browsertest"
)

// A chat UI renders a reply's Markdown in a page of its own origin: the
// chart's image link loads and decodes in a real browser that sends no key,
// and the page and the SVG the code wrote, opened from their links, run
// nothing (each would call the UI's server if it did).
func TestChatLinksOpenInABrowser(t *testing.T) {
	var mu sync.Mutex
	var page string
	var ran []string
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/favicon.ico":
			return
		case "/":
		default:
			ran = append(ran, r.URL.Path)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(ui.Close)

	code := fmt.Sprintf(`import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
plt.savefig('/work/chart.png')
open('/work/page.html', 'w').write('<script>new Image().src = "%[1]s/ran-html"</script>')
open('/work/plot.svg', 'w').write('<svg xmlns="http://www.w3.org/2000/svg" onload="new Image().src = &quot;%[1]s/ran-svg&quot;"/>')
print('saved')`, ui.URL)
	upstream := llmtest.New(t, llmtest.Fixed(llmtest.RunPython(code)), llmtest.Fixed(llmtest.Answer("Here is the chart.")))
	env := newChatEnv(t, chatSandboxes()[1], upstream, chatOptions{}) // local: real matplotlib
	got, _ := chatNew(t, env.client(aliceKey), openai.ChatCompletionNewParams{Model: "test-model", Messages: userMessages("Chart it.")}, codeInterpreter)
	content := got.Choices[0].Message.Content

	// The page a UI makes of the reply: images shown, and every link
	// opened in a frame, as a user clicking it would.
	var body strings.Builder
	links := regexp.MustCompile(`(!?)\[([^\]]*)\]\(([^)\s]+)\)`).FindAllStringSubmatch(content, -1)
	for _, l := range links {
		if l[1] == "!" {
			fmt.Fprintf(&body, "<img alt=%q src=\"%s\">\n", l[2], html.EscapeString(l[3]))
		}
		fmt.Fprintf(&body, "<iframe title=%q src=\"%s\"></iframe>\n", l[2], html.EscapeString(l[3]))
	}
	if len(links) != 3 {
		t.Fatalf("the reply has %d links, want chart.png, page.html and plot.svg:\n%s", len(links), content)
	}
	mu.Lock()
	page = "<!doctype html><title>chat</title>" + body.String()
	mu.Unlock()

	p := browsertest.OpenURL(t, ui.URL+"/", browsertest.Options{Width: 800, Height: 600})
	// The chart, and the SVG (an <img> runs no script).
	sizes := browsertest.Eval[map[string][2]int](t, p, `Promise.all([...document.images].map(i => i.decode().then(() => [i.alt, [i.naturalWidth, i.naturalHeight]]))).then(Object.fromEntries)`)
	if chart := sizes["chart.png"]; len(sizes) != 2 || chart[0] < 100 || chart[1] < 100 {
		t.Errorf("the images decoded as %v; want chart.png of a plot's size and plot.svg", sizes)
	}
	// The frames have loaded (or been refused) by the time each says so;
	// a script in them would have run by then.
	browsertest.Eval[int](t, p, `Promise.all([...document.querySelectorAll("iframe")].map(f => new Promise(done => {
		f.addEventListener("load", done); setTimeout(done, 3000)
	}))).then(a => a.length)`)
	// An image loaded by the page itself, after the frames: the UI's
	// server has seen every request the frames made before it.
	browsertest.Eval[bool](t, p, `new Promise(done => { const i = new Image(); i.onload = i.onerror = () => done(true); i.src = "/done" })`)
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != "/done" {
		t.Errorf("the UI's server was called %v; a script the code wrote ran in the browser", ran)
	}
}
