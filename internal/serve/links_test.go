package serve

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// fetch GETs url with no key, as a browser's <img> does, and returns the
// answer's status, headers and body.
func fetch(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// A link serves a copy of the file as it was, without a key, as its own
// type: an image inline, anything else (HTML and SVG above all, which would
// run in the server's origin) as a download, never sniffed. The copy
// outlives the container, and the file changing after.
func TestLinksServeACopyWithoutAKey(t *testing.T) {
	th := newTestHost(t, llmtest.New(t), func(c *Config) { c.PublicURL = "https://terp.example.com/base/" })
	c := th.create(t, "links")
	files := map[string]string{"chart.png": "\x89PNG\r\n\x1a\n", "page.html": "<script>alert(1)</script>", "plot.svg": "<svg onload='alert(1)'/>",
		"data.csv": "a,b\n1,2\n", "odd name [1].txt": "odd"}
	links := map[string]string{}
	for name, content := range files {
		if _, err := c.Conversation().Put(ctx(t), name, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		link, err := th.srv.Link(ctx(t), th.srv.BaseURL(&http.Request{Host: "ignored"}), c, name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(link, "https://terp.example.com/base/links/alice/") || !strings.HasSuffix(link, "/"+url.PathEscape(name)) {
			t.Errorf("%s: link %s does not start with --public-url and end with the name", name, link)
		}
		links[name] = th.URL + strings.TrimPrefix(link, "https://terp.example.com/base")
	}
	// Overwritten and gone with the container: the links still serve what
	// the code had saved when they were made.
	if _, err := c.Conversation().Put(ctx(t), "chart.png", strings.NewReader("changed")); err != nil {
		t.Fatal(err)
	}
	if err := th.srv.RemoveContainer(ctx(t), "alice", c.ID); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct{ typ, disposition string }{
		"chart.png":        {"image/png", "inline"},
		"page.html":        {"text/html; charset=utf-8", "attachment"},
		"plot.svg":         {"image/svg+xml", "attachment"},
		"data.csv":         {"text/csv; charset=utf-8", "attachment"},
		"odd name [1].txt": {"text/plain; charset=utf-8", "attachment"},
	} {
		status, h, body := fetch(t, links[name])
		if status != http.StatusOK || body != files[name] {
			t.Errorf("%s: %d %q, want 200 and what the code saved", name, status, body)
			continue
		}
		if got := h.Get("Content-Type"); got != want.typ {
			t.Errorf("%s: Content-Type %q, want %q", name, got, want.typ)
		}
		if got := h.Get("Content-Disposition"); !strings.HasPrefix(got, want.disposition+";") || !strings.Contains(got, "filename=") {
			t.Errorf("%s: Content-Disposition %q, want %s with the name", name, got, want.disposition)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("%s: headers %v, want nosniff and a sandboxing CSP", name, h)
		}
	}
	if !strings.Contains(mustHeader(t, links["odd name [1].txt"], "Content-Disposition"), `"odd name [1].txt"`) {
		t.Errorf("the odd name is not quoted whole in Content-Disposition")
	}
}

func mustHeader(t *testing.T, url, name string) string {
	t.Helper()
	_, h, _ := fetch(t, url)
	return h.Get(name)
}

// A link changed in any part is refused, one for another key's file
// reaches nothing, an expired one says when it expired, and one whose copy
// was deleted says so; none gives a byte of the file.
func TestLinksRefuseWhatTheyDoNotProve(t *testing.T) {
	th := newTestHost(t, llmtest.New(t), func(c *Config) { c.LinkLifetime = 72 * time.Hour })
	c := th.create(t, "links")
	if _, err := c.Conversation().Put(ctx(t), "secret.txt", strings.NewReader("alice's secret")); err != nil {
		t.Fatal(err)
	}
	link, err := th.srv.Link(ctx(t), th.URL, c, "secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := fetch(t, link); status != http.StatusOK || body != "alice's secret" {
		t.Fatalf("the link answered %d %q", status, body)
	}
	parts := strings.Split(strings.TrimPrefix(link, th.URL+"/links/"), "/") // owner, id, expires, sig, name
	if len(parts) != 5 {
		t.Fatalf("link %s has not five parts", link)
	}
	owner, id, expires, sig := parts[0], parts[1], parts[2], parts[3]
	mk := func(owner, id, expires, sig string) string {
		return fmt.Sprintf("%s/links/%s/%s/%s/%s/secret.txt", th.URL, owner, id, expires, sig)
	}
	flipped := []byte(sig)
	flipped[3] ^= 1
	for what, u := range map[string]string{
		"a changed signature":  mk(owner, id, expires, string(flipped)),
		"a later expiry":       mk(owner, id, fmt.Sprint(time.Now().Add(1000*time.Hour).Unix()), sig),
		"another owner":        mk("bob", id, expires, sig),
		"another file":         mk(owner, "file-00000000000000000000000000000000", expires, sig),
		"no signature":         mk(owner, id, expires, "x"),
		"an owner with no key": mk("mallory", id, expires, sig),
	} {
		if status, _, body := fetch(t, u); status != http.StatusForbidden || strings.Contains(body, "secret") {
			t.Errorf("%s: %d %q, want 403 and nothing of the file", what, status, body)
		}
	}
	// Bob's own valid signature over alice's file: bob's key reaches none
	// of alice's files.
	bobKeyOf, _ := th.srv.keys.linkKey("bob")
	exp := time.Now().Add(time.Hour).Unix()
	if status, _, body := fetch(t, mk("bob", id, fmt.Sprint(exp), linkSignature(bobKeyOf, "bob", id, exp))); status != http.StatusNotFound || strings.Contains(body, "secret") {
		t.Errorf("bob's signed link to alice's file: %d %q, want 404", status, body)
	}
	// Signed, but past its time.
	aliceKeyOf, _ := th.srv.keys.linkKey("alice")
	past := time.Now().Add(-time.Minute).Unix()
	status, _, body := fetch(t, mk(owner, id, fmt.Sprint(past), linkSignature(aliceKeyOf, owner, id, past)))
	if status != http.StatusGone || !strings.Contains(body, "expired on") || !strings.Contains(body, "3 days") || strings.Contains(body, "secret") {
		t.Errorf("an expired link: %d %q, want 410 saying when and for how long links work", status, body)
	}
	// The copy deleted: the link says so.
	if err := th.srv.State().DeleteFile(ctx(t), "alice", id); err != nil {
		t.Fatal(err)
	}
	if status, _, body := fetch(t, link); status != http.StatusNotFound || !strings.Contains(body, "deleted") {
		t.Errorf("a deleted copy: %d %q, want 404 saying so", status, body)
	}
}

// The copies of links past their lifetime are deleted; the others kept.
func TestLinksArePrunedAfterTheirLifetime(t *testing.T) {
	th := newTestHost(t, llmtest.New(t), func(c *Config) { c.LinkLifetime = time.Hour })
	c := th.create(t, "links")
	if _, err := c.Conversation().Put(ctx(t), "a.txt", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	link, err := th.srv.Link(ctx(t), th.URL, c, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	th.srv.pruneLinks(time.Now().Add(30 * time.Minute))
	if status, _, _ := fetch(t, link); status != http.StatusOK {
		t.Fatalf("a link within its lifetime was pruned: %d", status)
	}
	th.srv.pruneLinks(time.Now().Add(2 * time.Hour))
	files, err := th.srv.State().Files(ctx(t), "alice")
	if err != nil || len(files) != 0 {
		t.Errorf("after its lifetime the copy is still stored: %v %v", files, err)
	}
}

// One byte range is served as 206, the rest of the forms as the whole
// file; a range past the end is 416.
func TestServeContentRanges(t *testing.T) {
	const body = "0123456789"
	for _, tc := range []struct {
		header string
		status int
		want   string
		rng    string
	}{
		{"", http.StatusOK, body, ""},
		{"bytes=2-4", http.StatusPartialContent, "234", "bytes 2-4/10"},
		{"bytes=7-", http.StatusPartialContent, "789", "bytes 7-9/10"},
		{"bytes=-3", http.StatusPartialContent, "789", "bytes 7-9/10"},
		{"bytes=8-100", http.StatusPartialContent, "89", "bytes 8-9/10"},
		{"bytes=0-1,4-5", http.StatusOK, body, ""},
		{"bytes=5-2", http.StatusOK, body, ""},
		{"items=1-2", http.StatusOK, body, ""},
		{"bytes=x-2", http.StatusOK, body, ""},
		{"bytes=10-12", http.StatusRequestedRangeNotSatisfiable, "", "bytes */10"},
	} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/f", nil)
		if tc.header != "" {
			r.Header.Set("Range", tc.header)
		}
		ServeContent(rec, r, strings.NewReader(body), int64(len(body)))
		if rec.Code != tc.status || rec.Body.String() != tc.want || rec.Header().Get("Content-Range") != tc.rng {
			t.Errorf("Range %q: %d %q %q; want %d %q %q", tc.header, rec.Code, rec.Body.String(), rec.Header().Get("Content-Range"), tc.status, tc.want, tc.rng)
		}
	}
}
