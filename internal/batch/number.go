package batch

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Found is a number as it was written in an answer.
type Found struct {
	// Text is the number as written, "26,450" or "14.0%".
	Text  string
	Value float64
	// Percent is set when a % sign followed the number; Value is then the
	// number before the sign (14 for "14%").
	Percent bool
}

// Numbers finds the numbers in text the way a reader would: thousands
// separators ("26,450", "1,234,567.5"), signs ("-3", "+12%", the Unicode
// minus "−3"), decimals without a leading digit (".5"), scientific notation
// ("1.2e-5") and percentages ("14%", "14 %"). A hyphen between digits or
// after a letter is not a minus sign: "2025-12" is 2025 and 12, "COVID-19"
// is 19. A comma is a thousands separator only before exactly three digits
// and after one to three, so "3,14" and "1,2,3" are lists. Suffixes such as
// "k" or "M" are not read.
func Numbers(text string) []Found {
	var out []Found
	for i := 0; i < len(text); {
		f, end, ok := numberAt(text, i)
		if !ok {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			continue
		}
		out = append(out, f)
		i = end
	}
	return out
}

// numberAt reads a number starting at byte i, returning it and the index
// after it.
func numberAt(s string, i int) (Found, int, bool) {
	start, j := i, i
	neg := false
	switch {
	case s[j] == '-' || s[j] == '+':
		neg = s[j] == '-'
		j++
	case strings.HasPrefix(s[j:], "−"): // U+2212 MINUS SIGN
		neg = true
		j += len("−")
	}
	if j > start && wordBefore(s, start) {
		return Found{}, 0, false // a hyphen inside "2025-12" or "COVID-19"
	}
	digits := func(k int) int {
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		return k
	}
	var num strings.Builder
	if neg {
		num.WriteByte('-')
	}
	intStart := j
	j = digits(j)
	if j == intStart {
		// ".5", but not the ".3" of "1.2.3".
		if j+1 >= len(s) || s[j] != '.' || !isDigit(s[j+1]) || (j > 0 && isDigit(s[j-1])) {
			return Found{}, 0, false
		}
		num.WriteByte('0')
	}
	num.WriteString(s[intStart:j])
	if n := j - intStart; n >= 1 && n <= 3 {
		// Thousands groups: ",ddd" not followed by another digit.
		for j+4 <= len(s) && s[j] == ',' && isDigit(s[j+1]) && isDigit(s[j+2]) && isDigit(s[j+3]) &&
			(j+4 == len(s) || !isDigit(s[j+4])) {
			num.WriteString(s[j+1 : j+4])
			j += 4
		}
	}
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		k := digits(j + 1)
		num.WriteString(s[j:k])
		j = k
	}
	if j+1 < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if s[k] == '-' || s[k] == '+' {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			e := digits(k)
			num.WriteString(s[j:e])
			j = e
		}
	}
	v, err := strconv.ParseFloat(num.String(), 64)
	if err != nil {
		return Found{}, 0, false // out of range
	}
	f := Found{Value: v}
	end := j
	switch {
	case end < len(s) && s[end] == '%':
		f.Percent, end = true, end+1
	case end+1 < len(s) && s[end] == ' ' && s[end+1] == '%':
		f.Percent, end = true, end+2
	}
	f.Text = s[start:end]
	return f, end, true
}

// wordBefore reports whether the character before byte i is a letter or a
// digit, which makes a following hyphen a hyphen.
func wordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
