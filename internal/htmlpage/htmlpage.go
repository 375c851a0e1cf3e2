// Package htmlpage is what terp's web pages share (the exported
// conversation of package export, the batch report of package batch): a
// page that needs nothing else, its head, its Content-Security-Policy and
// its base style, light or dark as the reader's system is. Each page adds
// the style of its own parts.
package htmlpage

// CSP is every page's Content-Security-Policy: no script at all, styles
// only from the page itself, images only from data: URIs. Were the
// escaping ever to let markup through, the browser would still load and
// run nothing. Links are navigation, which it does not govern.
const CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

// Head is the template "head": the document up to its body, for a page
// whose data has Title and CSS (BaseCSS and the page's own). A page's
// template parses it first and begins with {{template "head" .}}.
const Head = `{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="` + CSP + `">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="terp">
<title>{{.Title}}</title>
<link rel="icon" href="data:,">
<style>{{.CSS}}</style>
</head>{{end}}`

// BaseCSS is every page's base style: the colours, light and dark, one
// column as wide as --width that narrows to a phone, headings, notes and
// monospace. A page sets --width and adds colours of its own in :root.
const BaseCSS = `
:root { color-scheme: light dark; --fg: #1f2328; --muted: #59636e; --bg: #fff; --box: #f6f8fa; --line: #d1d9e0; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --box: #161b22; --line: #3d444d; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: var(--width, 52rem); padding: 1rem; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; line-height: 1.25; }
h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; }
.meta, .note { color: var(--muted); font-size: .9rem; }
pre, code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--box); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .75rem; max-width: 100%; }
ul { padding-left: 1.25rem; }
`
