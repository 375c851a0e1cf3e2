// Package browsertest opens terp's web pages (the exported conversation, the
// batch report) in a real headless Chromium, driven over the DevTools
// protocol with chromedp, and records what a reader's browser did with them:
// what it wrote to the console, what it threw, what it requested. It is
// apart from terptest so that only the tests that drive a browser build
// chromedp.
package browsertest

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/terpdev/terp/internal/terptest"
)

// Options say how to open a page.
type Options struct {
	// Width and Height are the viewport's, in CSS pixels; Mobile emulates a
	// phone (the page's viewport meta tag then decides its layout width),
	// at Scale device pixels per CSS pixel (1 when 0).
	Width, Height int64
	Mobile        bool
	Scale         float64
	// BypassCSP switches the page's Content-Security-Policy off, to test
	// what the page's escaping alone keeps out.
	BypassCSP bool
}

// Page is a page open in the browser.
type Page struct {
	ctx context.Context
	url string

	mu       sync.Mutex
	problems []string // console errors, exceptions, browser log errors
	requests []string // every URL the page requested
}

// Open starts a headless Chromium (the one terptest.Chromium finds, or the
// test skips), opens the file at path as a file:// URL and waits for it to
// load. The browser ends with the test.
func Open(t *testing.T, path string, o Options) *Page {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return OpenURL(t, (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), o)
}

// OpenURL is Open for a page at any URL: one an HTTP server serves, to be
// of an origin of its own.
func OpenURL(t *testing.T, pageURL string, o Options) *Page {
	t.Helper()
	bin := terptest.Chromium(t)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(bin))
	if os.Geteuid() == 0 {
		// Chromium refuses to start as root with its sandbox on (the
		// sandbox needs an unprivileged user); the page is ours.
		opts = append(opts, chromedp.NoSandbox)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(ctx)
	t.Cleanup(cancelTab)

	p := &Page{ctx: ctx, url: pageURL}
	if err := chromedp.Listen(ctx, p.record); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	vp := []chromedp.EmulateViewportOption{chromedp.EmulateScale(scale)}
	if o.Mobile {
		vp = append(vp, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(o.Width, o.Height, vp...)}
	if o.BypassCSP {
		steps = append(steps, chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
			_, err := cdp.Call(ctx, tab, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
			return err
		}))
	}
	steps = append(steps, chromedp.Navigate(p.url))
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("open %s in %s: %v", p.url, bin, err)
	}
	return p
}

// record keeps what the page did. It runs in chromedp's read loop, so it
// only appends.
func (p *Page) record(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p.problems = append(p.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		p.problems = append(p.problems, "exception: "+msg)
	case *log.EventEntryAdded:
		// The browser's own complaints: a blocked load, a CSP violation.
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			p.problems = append(p.problems, "browser "+string(ev.Entry.Level)+" ("+string(ev.Entry.Source)+"): "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, ev.Request.URL)
	}
}

// Problems are the console errors, uncaught exceptions and the browser's
// errors and warnings so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.problems)
}

// ForeignRequests are the requests so far for anything but the page itself
// and data: URIs.
func (p *Page) ForeignRequests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, u := range p.requests {
		if u != p.url && !strings.HasPrefix(u, "data:") {
			out = append(out, u)
		}
	}
	return out
}

// Requests counts the requests so far, the page's own included.
func (p *Page) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// Eval runs a JavaScript expression in the page (awaiting it when it is a
// promise) and decodes its value into a T.
func Eval[T any](t *testing.T, p *Page, js string) T {
	t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// Screenshot takes a screenshot of the whole page, writes it as name (a
// .png) to terptest.ArtifactsDir, logs
// where, and fails the test unless it is a PNG with something drawn on it.
func (p *Page) Screenshot(t *testing.T, name string) image.Image {
	t.Helper()
	b, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(terptest.ArtifactsDir(t), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot %s is not a PNG: %v", path, err)
	}
	if blank(img) {
		t.Errorf("the screenshot %s is blank: every pixel is the same colour", path)
	}
	return img
}

// blank tells whether every pixel of img has the colour of the first one.
func blank(img image.Image) bool {
	r := img.Bounds()
	r0, g0, b0, a0 := img.At(r.Min.X, r.Min.Y).RGBA()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if r1, g1, b1, a1 := img.At(x, y).RGBA(); r1 != r0 || g1 != g0 || b1 != b0 || a1 != a0 {
				return false
			}
		}
	}
	return true
}
