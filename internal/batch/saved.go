package batch

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// FileCheck is what a saved file must hold, read back after the run: a file
// that merely exists (a raw copy, "{}", a blank picture) does not pass.
type FileCheck struct {
	// Columns are a CSV file's header, in any order, compared without case.
	Columns []string `json:"columns"`
	// Rows is a CSV file's number of rows after the header.
	Rows *int `json:"rows"`
	// Sums are totals of CSV columns, by column name.
	Sums map[string]Number `json:"sums"`
	// Values are a JSON object's numbers, by key.
	Values map[string]Number `json:"values"`
}

// MaxCheckedFile bounds what a runner reads back of one saved file.
const MaxCheckedFile = 8 << 20

func (fc FileCheck) check(name string, data []byte) []string {
	if data == nil {
		return []string{fmt.Sprintf("file %s could not be read back to check what it holds", name)}
	}
	if strings.EqualFold(path.Ext(name), ".json") {
		return fc.checkJSON(name, data)
	}
	return fc.checkCSV(name, data)
}

func (fc FileCheck) checkCSV(name string, data []byte) []string {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil || len(records) == 0 {
		return []string{fmt.Sprintf("file %s is not a CSV file with a header: %v", name, err)}
	}
	header := make([]string, len(records[0]))
	for i, h := range records[0] {
		header[i] = strings.ToLower(strings.TrimSpace(h))
	}
	var reasons []string
	if fc.Columns != nil {
		want := make([]string, len(fc.Columns))
		for i, c := range fc.Columns {
			want[i] = strings.ToLower(c)
		}
		got := slices.Clone(header)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			reasons = append(reasons, fmt.Sprintf("file %s has the columns %s, not %s", name, strings.Join(records[0], ", "), strings.Join(fc.Columns, ", ")))
		}
	}
	rows := records[1:]
	if fc.Rows != nil && len(rows) != *fc.Rows {
		reasons = append(reasons, fmt.Sprintf("file %s has %d rows, not %d", name, len(rows), *fc.Rows))
	}
	for _, col := range sortedKeys(fc.Sums) {
		i := slices.Index(header, strings.ToLower(col))
		if i < 0 {
			reasons = append(reasons, fmt.Sprintf("file %s has no column %s", name, col))
			continue
		}
		sum := 0.0
		bad := ""
		for _, rec := range rows {
			if i >= len(rec) || strings.TrimSpace(rec[i]) == "" {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				bad = rec[i]
				break
			}
			sum += v
		}
		want := fc.Sums[col]
		switch {
		case bad != "":
			reasons = append(reasons, fmt.Sprintf("file %s's column %s holds %q, not a number", name, col, bad))
		case !want.Within(sum):
			reasons = append(reasons, fmt.Sprintf("file %s's column %s adds up to %s, not %s", name, col, formatFloat(sum), formatFloat(want.Centre())))
		}
	}
	return reasons
}

func (fc FileCheck) checkJSON(name string, data []byte) []string {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return []string{fmt.Sprintf("file %s is not a JSON object: %v", name, err)}
	}
	var reasons []string
	if fc.Values != nil && len(obj) != len(fc.Values) {
		reasons = append(reasons, fmt.Sprintf("file %s has %d keys, not %d", name, len(obj), len(fc.Values)))
	}
	for _, k := range sortedKeys(fc.Values) {
		want := fc.Values[k]
		var v float64
		switch x := obj[k].(type) {
		case float64:
			v = x
		case string:
			var err error
			if v, err = strconv.ParseFloat(x, 64); err != nil {
				reasons = append(reasons, fmt.Sprintf("file %s's %q is %q, not a number", name, k, x))
				continue
			}
		case nil:
			reasons = append(reasons, fmt.Sprintf("file %s has no key %q", name, k))
			continue
		default:
			reasons = append(reasons, fmt.Sprintf("file %s's %q is not a number", name, k))
			continue
		}
		if !want.Within(v) {
			reasons = append(reasons, fmt.Sprintf("file %s's %q is %s, not %s", name, k, formatFloat(v), formatFloat(want.Centre())))
		}
	}
	return reasons
}

// checkImage says why a saved PNG is not a chart: it cannot be read, is too
// small to show anything, or is one colour (an empty canvas); "" when it
// could be one.
func checkImage(name string, data []byte) string {
	if data == nil {
		return fmt.Sprintf("chart %s could not be read back to check it", name)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Sprintf("chart %s is not a PNG image: %v", name, err)
	}
	b := img.Bounds()
	if b.Dx() < 100 || b.Dy() < 100 {
		return fmt.Sprintf("chart %s is %d×%d pixels, too small to be a chart", name, b.Dx(), b.Dy())
	}
	if inked(img) < 0.005 {
		return fmt.Sprintf("chart %s is blank: almost every pixel is its background colour", name)
	}
	return ""
}

// inked is the share of an image's pixels that differ from its top-left
// corner, the background of a chart.
func inked(img image.Image) float64 {
	b := img.Bounds()
	r0, g0, b0, a0 := img.At(b.Min.X, b.Min.Y).RGBA()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 || a != a0 {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
