// Package gfm is goldmark v1.7.13's extension parsers that terp's Markdown
// rendering uses: GitHub Flavored Markdown's tables, strikethrough, task
// lists and linkify (GFM), and PHP Markdown Extra's definition lists
// (DefinitionList), with goldmark's names, parsers, priorities and
// behaviour. They make goldmark's own nodes
// (github.com/yuin/goldmark/extension/ast, whose initialisation is cheap),
// which the ansi renderer draws.
//
// Why a copy: Go initialises every package a program links before main
// runs, and github.com/yuin/goldmark/extension compiles linkify's, the
// tables' and the task lists' regular expressions (and builds its HTML
// renderers' attribute filters) in package variables, so every terp command
// paid about 0.35 ms and 264 KB of allocations for them, although only the
// chat's answers are parsed as Markdown.
//
// What changed, from goldmark's extension/{gfm,linkify,table,strikethrough,
// tasklist,definition_list}.go:
//   - the regular expressions are compiled on first use (sync.OnceValue);
//   - the extenders register parsers only, not goldmark's HTML renderers
//     for these nodes, nor those renderers' options (TableOption and the
//     attribute filters, also built at initialisation): glamour.go replaces
//     goldmark's HTML renderer with the ansi one, so they were never used;
//   - linkify's options (allowed protocols, custom regular expressions) are
//     left out: terp sets none, and the parser does what goldmark's does
//     when none is set;
//   - the parsers' New functions are left out (the extenders use the
//     parsers directly), and so are footnotes, CJK and the typographer,
//     which terp does not use;
//   - linkify loses two nil checks that could not fail, and three
//     statements are written as the linter asks (an inferred type, a
//     switch, De Morgan's law), which changes nothing.
//
// The tests parse a corpus of Markdown with this package and with goldmark's
// extension package, and compare the trees and the HTML. LICENSE is
// goldmark's.
package gfm

import (
	"github.com/yuin/goldmark"
)

type gfm struct {
}

// GFM is an extension that provides Github Flavored markdown functionalities.
var GFM = &gfm{}

func (e *gfm) Extend(m goldmark.Markdown) {
	Linkify.Extend(m)
	Table.Extend(m)
	Strikethrough.Extend(m)
	TaskList.Extend(m)
}
