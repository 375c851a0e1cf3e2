package tui

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/iterm2"
	"github.com/charmbracelet/x/ansi/kitty"
	"github.com/charmbracelet/x/ansi/sixel"
	"github.com/muesli/termenv"
)

// picture is an image the code saved, decoded once and drawn at whatever
// size the terminal has.
type picture struct {
	img image.Image
	// data is the file itself, for the protocols that take an encoded
	// image (kitty and iTerm2 both read PNG).
	data []byte
	png  bool
	// id names the image to a kitty terminal.
	id   int
	memo map[imageSize]imageBlock
}

type imageSize struct{ cols, rows int }

// imageBlock is a picture ready for the transcript: the rows it takes, and
// for graphics protocols the slot that says how to draw over them.
type imageBlock struct {
	lines []string
	slot  *imageSlot
}

// imageSlot marks transcript rows that a terminal graphics protocol draws
// on. Bubble Tea repaints the screen line by line, so an image cannot simply
// be printed: with kitty the rows are Unicode placeholders, text that scrolls
// like any other, and the image data goes with the first row on screen;
// iTerm2 and sixel images are drawn over their rows once all of them are on
// screen, and the rows show the half-block preview until then.
type imageSlot struct {
	line       int // first row, in the block, then in the transcript
	rows, cols int
	col        int // first column
	// transmit, for kitty, sends the image and its placement.
	transmit string
	// draw, for iTerm2 and sixel, draws the image at the cursor.
	draw string
}

// Cells are about twice as tall as wide; sixel needs their size in pixels,
// which a terminal tells only when asked, so a small cell is assumed and
// the image is at worst drawn a little smaller than its slot.
const (
	cellWidthPx  = 8
	cellHeightPx = 16
)

// fit returns the cells an image of w×h pixels takes, as large as allowed
// while keeping its aspect ratio.
func fit(w, h, maxCols, maxRows int) imageSize {
	if w <= 0 || h <= 0 || maxCols <= 0 || maxRows <= 0 {
		return imageSize{}
	}
	cols := maxCols
	rows := (cols*h + w) / (2 * w) // rounded
	if rows > maxRows {
		rows = maxRows
		cols = max(1, rows*2*w/h)
	}
	return imageSize{cols: min(cols, maxCols), rows: max(rows, 1)}
}

// render draws the picture in at most maxCols×maxRows cells with protocol.
func (p *picture) render(protocol Protocol, profile termenv.Profile, maxCols, maxRows int) imageBlock {
	b := p.img.Bounds()
	size := fit(b.Dx(), b.Dy(), maxCols, maxRows)
	if size.cols == 0 || protocol == NoImages {
		return imageBlock{}
	}
	if blk, ok := p.memo[size]; ok {
		return blk
	}
	var blk imageBlock
	switch protocol {
	case Kitty:
		if p.png {
			blk = imageBlock{
				lines: kittyPlaceholders(p.id, size),
				slot:  &imageSlot{rows: size.rows, cols: size.cols, transmit: kittyTransmit(p.data, p.id, size)},
			}
			break
		}
		blk.lines = halfBlock(p.img, size, profile)
	case ITerm2, Sixel:
		draw := iterm2Image(p.data, size)
		if protocol == Sixel {
			draw = sixelImage(p.img, size)
		}
		blk = imageBlock{
			lines: halfBlock(p.img, size, profile),
			slot:  &imageSlot{rows: size.rows, cols: size.cols, draw: draw},
		}
	default:
		blk.lines = halfBlock(p.img, size, profile)
	}
	if p.memo == nil {
		p.memo = map[imageSize]imageBlock{}
	}
	p.memo[size] = blk
	return blk
}

// halfBlock draws img with "▀" cells, two pixels each, in the colours the
// profile has. Without colour (NO_COLOR) it falls back to shades of one
// character, which still show the shape of a chart.
func halfBlock(img image.Image, size imageSize, profile termenv.Profile) []string {
	px := sample(img, size.cols, size.rows*2)
	lines := make([]string, size.rows)
	var b strings.Builder
	for y := range size.rows {
		b.Reset()
		last := ""
		for x := range size.cols {
			top, bottom := px[2*y*size.cols+x], px[(2*y+1)*size.cols+x]
			if profile == termenv.Ascii {
				b.WriteRune(shade(top, bottom))
				continue
			}
			seq := profile.Color(hex(top)).Sequence(false) + ";" + profile.Color(hex(bottom)).Sequence(true)
			if seq != last {
				b.WriteString("\x1b[" + seq + "m")
				last = seq
			}
			b.WriteRune('▀')
		}
		if profile != termenv.Ascii {
			b.WriteString(ansi.ResetStyle)
		}
		lines[y] = b.String()
	}
	return lines
}

// sample scales img to w×h pixels over white. Each pixel is a mean of the
// pixels it covers, weighted towards ink: charts are thin dark lines on
// paper, which a plain mean washes out and nearest-neighbour sampling
// drops.
func sample(img image.Image, w, h int) []color.RGBA {
	b := img.Bounds()
	out := make([]color.RGBA, w*h)
	for y := range h {
		y0 := b.Min.Y + y*b.Dy()/h
		y1 := max(b.Min.Y+(y+1)*b.Dy()/h, y0+1)
		for x := range w {
			x0 := b.Min.X + x*b.Dx()/w
			x1 := max(b.Min.X+(x+1)*b.Dx()/w, x0+1)
			var r, g, bl, n float64
			for sy := y0; sy < y1; sy++ {
				for sx := x0; sx < x1; sx++ {
					pr, pg, pb := over(img.At(sx, sy))
					ink := 1 - (0.299*pr+0.587*pg+0.114*pb)/0xffff
					wt := 1 + inkWeight*ink
					r, g, bl, n = r+wt*pr, g+wt*pg, bl+wt*pb, n+wt
				}
			}
			out[y*w+x] = color.RGBA{uint8(r / n / 257), uint8(g / n / 257), uint8(bl / n / 257), 0xff}
		}
	}
	return out
}

// inkWeight is how much more a dark pixel counts than a white one when
// pixels are averaged.
const inkWeight = 12

// over returns c composited over white, in 16-bit channels.
func over(c color.Color) (r, g, b float64) {
	cr, cg, cb, ca := c.RGBA()
	// Premultiplied: add the white showing through.
	return float64(cr + 0xffff - ca), float64(cg + 0xffff - ca), float64(cb + 0xffff - ca)
}

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// shade picks a character as light as two pixels together.
func shade(top, bottom color.RGBA) rune {
	lum := func(c color.RGBA) int { return (299*int(c.R) + 587*int(c.G) + 114*int(c.B)) / 1000 }
	l := (lum(top) + lum(bottom)) / 2
	shades := []rune(" ░▒▓█")
	return shades[min(l*len(shades)/256, len(shades)-1)]
}

// kittyPlaceholders are the rows of a kitty image placed with Unicode
// placeholders: each cell names its row and column with diacritics, and the
// foreground colour carries the image id.
func kittyPlaceholders(id int, size imageSize) []string {
	fg := fmt.Sprintf("\x1b[38;2;%d;%d;%dm", id>>16&0xff, id>>8&0xff, id&0xff)
	lines := make([]string, size.rows)
	var b strings.Builder
	for r := range size.rows {
		b.Reset()
		b.WriteString(fg)
		for c := range size.cols {
			b.WriteRune(kitty.Placeholder)
			b.WriteRune(kitty.Diacritic(r))
			b.WriteRune(kitty.Diacritic(c))
		}
		b.WriteString("\x1b[39m")
		lines[r] = b.String()
	}
	return lines
}

// kittyTransmit sends a PNG to a kitty terminal in chunks and creates the
// virtual placement the placeholders show. q=2 keeps the terminal from
// answering, which would arrive as input.
func kittyTransmit(data []byte, id int, size imageSize) string {
	payload := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for first := true; first || payload != ""; first = false {
		n := min(len(payload), kitty.MaxChunkSize)
		chunk := payload[:n]
		payload = payload[n:]
		more := "m=0"
		if payload != "" {
			more = "m=1"
		}
		opts := []string{more}
		if first {
			opts = []string{"a=t", "f=100", fmt.Sprintf("i=%d", id), "q=2", more}
		}
		b.WriteString(ansi.KittyGraphics([]byte(chunk), opts...))
	}
	b.WriteString(ansi.KittyGraphics(nil, "a=p", "U=1", fmt.Sprintf("i=%d", id),
		fmt.Sprintf("c=%d", size.cols), fmt.Sprintf("r=%d", size.rows), "q=2"))
	return b.String()
}

// iterm2Image draws a file with iTerm2's inline image protocol, scaled by
// the terminal to the slot.
func iterm2Image(data []byte, size imageSize) string {
	return ansi.ITerm2(iterm2.File{
		Size:    int64(len(data)),
		Width:   iterm2.Cells(size.cols),
		Height:  iterm2.Cells(size.rows),
		Inline:  true,
		Content: []byte(base64.StdEncoding.EncodeToString(data)),
	})
}

// sixelImage draws img as sixels, scaled here, since sixel has no scaling.
func sixelImage(img image.Image, size imageSize) string {
	b := img.Bounds()
	w, h := size.cols*cellWidthPx, size.rows*cellHeightPx
	// Keep the aspect ratio inside the slot.
	if w*b.Dy() > h*b.Dx() {
		w = max(1, h*b.Dx()/b.Dy())
	} else {
		h = max(1, w*b.Dy()/b.Dx())
	}
	px := sample(img, w, h)
	scaled := image.NewRGBA(image.Rect(0, 0, w, h))
	for i, c := range px {
		scaled.SetRGBA(i%w, i/w, c)
	}
	var out bytes.Buffer
	if err := (&sixel.Encoder{}).Encode(&out, scaled); err != nil {
		return ""
	}
	return ansi.SixelGraphics(0, 1, 0, out.Bytes())
}

// overlay draws seq with its top left corner at row, col of the screen
// (0-based) and puts the cursor back, so the repaint goes on undisturbed.
func overlay(seq string, row, col int) string {
	return ansi.SaveCursor + ansi.CursorPosition(col+1, row+1) + seq + ansi.RestoreCursor
}

// toRGBA returns img as *image.RGBA, which samples fast.
func toRGBA(img image.Image) image.Image {
	if _, ok := img.(*image.RGBA); ok {
		return img
	}
	b := img.Bounds()
	out := image.NewRGBA(b)
	draw.Draw(out, b, img, b.Min, draw.Src)
	return out
}
