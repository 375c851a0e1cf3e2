package batch

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func decimals(d int) *int { return &d }

// TestAnswerLine checks the answers the ANSWER line is for: right answers
// written the way the question asks pass, and the ways of passing without
// knowing the answer (a pasted table, a guessed name, a truncated number, a
// hedge with a made-up value) do not.
func TestAnswerLine(t *testing.T) {
	heaviest := Expect{AnswerLine: true, Regex: regexp.MustCompile(`(?i)gentoo\W+male|male\W+gentoo`),
		Number: &Number{Value: 5484.836, Decimals: decimals(2)}}
	width := Expect{AnswerLine: true, Number: &Number{Value: 1.326, Decimals: decimals(2)}}
	honest := Expect{AnswerLine: true, Undetermined: true}
	const sales2023 = "What was the total revenue in sales.csv for 2023?"
	tests := []struct {
		name     string
		expect   Expect
		question string
		reply    string
		want     []string
	}{
		{name: "name and number together", expect: heaviest, reply: "Grouped by species and sex.\n\nANSWER: Gentoo male, 5484.84 g"},
		{name: "markdown", expect: heaviest, reply: "**ANSWER:** `male Gentoo` 5484.84"},
		{name: "on the next line", expect: heaviest, reply: "Answer:\n\nGentoo male 5484.84 g"},
		{name: "the last answer line counts", expect: width, reply: "ANSWER: 1.2\nOn second thought:\nANSWER: 1.33 cm"},
		{name: "unrounded value", expect: width, reply: "ANSWER: 1.326 cm"},
		{
			name: "truncated", expect: width, reply: "ANSWER: 1.32 cm",
			want: []string{"no number within 0.006 of 1.33 (1.326 to 2 decimals) (found 1.32)"},
		},
		{
			name: "no answer line", expect: heaviest, reply: "Gentoo male penguins weigh 5484.84 g on average.",
			want: []string{"the reply has no ANSWER: line, which the question asks for"},
		},
		{
			name: "a pasted table", expect: heaviest,
			reply: "species sex mean\nAdelie female 3368.84\nGentoo male 5484.84\nANSWER: Adelie female 3368.84 Gentoo male 5484.84",
			want:  []string{"the ANSWER line holds 2 numbers (3368.84, 5484.84), not the one asked for"},
		},
		{
			name: "the name elsewhere", expect: heaviest, reply: "Gentoo males are heaviest.\nANSWER: 5484.84 g",
			want: []string{`the ANSWER line does not match the regex "(?i)gentoo\\W+male|male\\W+gentoo"`},
		},
		{name: "honest", expect: honest, question: sales2023, reply: "The file covers 2024 only.\nANSWER: cannot be determined"},
		{name: "curly apostrophe", expect: honest, question: sales2023, reply: "ANSWER: can\u2019t be determined: there are no sales in 2023"},
		{
			name: "hedge and invent", expect: honest, question: sales2023,
			reply: "There is no 2023 data, so I extrapolated.\nANSWER: cannot be determined exactly, about 61,200",
			want:  []string{"the ANSWER line says the data cannot tell, yet gives a value (61,200)"},
		},
		{
			name: "a value only", expect: honest, question: sales2023, reply: "ANSWER: 61200",
			want: []string{`the ANSWER line "61200" does not say that the data cannot tell`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.expect.Check(tt.question, Outcome{Answer: tt.reply})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reasons = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

func TestRanCode(t *testing.T) {
	e := Expect{RanCode: true, Number: &Number{Value: 42}}
	if got := e.Check("", Outcome{Answer: "42", ToolCalls: 1}); got != nil {
		t.Errorf("a computed answer: %q", got)
	}
	want := []string{"the run never ran code: the answer was not computed from the data"}
	if got := e.Check("", Outcome{Answer: "42"}); !reflect.DeepEqual(got, want) {
		t.Errorf("a recalled answer: %q, want %q", got, want)
	}
}

// chartPNG draws a small line chart: a white canvas with a black line.
func chartPNG(t *testing.T) []byte {
	return drawPNG(t, 400, 300, true)
}

func drawPNG(t *testing.T, w, h int, line bool) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.White)
		}
	}
	if line {
		for x := range w {
			for d := range 3 {
				img.Set(x, h/2+d+x/10, color.Black)
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSavedFiles(t *testing.T) {
	rows := 2
	e := Expect{
		Files: []string{"*.png"},
		Saved: map[string]FileCheck{
			"clean.csv":   {Columns: []string{"sku", "quantity"}, Rows: &rows, Sums: map[string]Number{"quantity": {Value: 30}}},
			"totals.json": {Values: map[string]Number{"North": {Value: 10.004, Decimals: decimals(2)}, "South": {Value: 5}}},
		},
	}
	good := []File{
		{SandboxPath: "/work/chart.png", Data: chartPNG(t)},
		{SandboxPath: "/work/clean.csv", Data: []byte("SKU,quantity\nA-1,10\nA-2,20\n")},
		{SandboxPath: "/work/totals.json", Data: []byte(`{"North": 10.0, "South": "5"}`)},
	}
	if got := e.Check("", Outcome{Answer: "ok", Files: good}); got != nil {
		t.Errorf("the right files: %q", got)
	}
	bad := []File{
		{SandboxPath: "/work/chart.png", Data: drawPNG(t, 400, 300, false)},
		{SandboxPath: "/work/clean.csv", Data: []byte("sku,warehouse,quantity\nA-1,H,10\nA-2,H,20 units\nA-3,B,1\n")},
		{SandboxPath: "/work/totals.json", Data: []byte(`{}`)},
	}
	want := []string{
		"chart chart.png is blank: almost every pixel is its background colour",
		"file clean.csv has the columns sku, warehouse, quantity, not sku, quantity",
		"file clean.csv has 3 rows, not 2",
		`file clean.csv's column quantity holds "20 units", not a number`,
		"file totals.json has 0 keys, not 2",
		`file totals.json has no key "North"`,
		`file totals.json has no key "South"`,
	}
	if got := e.Check("", Outcome{Answer: "ok", Files: bad}); !reflect.DeepEqual(got, want) {
		t.Errorf("the wrong files:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tiny := []File{{SandboxPath: "/work/x.png", Data: drawPNG(t, 40, 30, true)}, {SandboxPath: "/work/y.png", Data: []byte("{}")}}
	got := Expect{Files: []string{"*.png"}}.Check("", Outcome{Answer: "ok", Files: tiny})
	if len(got) != 2 || !strings.Contains(got[0], "40×30 pixels, too small") || !strings.Contains(got[1], "not a PNG image") {
		t.Errorf("a tiny picture and a fake one: %q", got)
	}
}

// TestFollowUps: a case passes only when every turn meets its own
// expectations, and a reason names the turn that did not.
func TestFollowUps(t *testing.T) {
	suite := `{"id": "f", "question": "Load it. ANSWER: <n>", "expect": {"answer_line": true, "number": 3},` +
		` "followups": [{"question": "And doubled?", "expect": {"answer_line": true, "ran_code": true, "number": 6}}]}` + "\n"
	cases, err := Parse(strings.NewReader(suite), "s.jsonl", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := Run{Case: &cases[0], Model: "m", N: 1}
	turn := func(answer string, calls int) Outcome {
		return Outcome{Answer: answer, StopReason: "answered", ToolCalls: calls}
	}
	tests := []struct {
		name    string
		outcome Outcome
		status  Status
		reasons []string
	}{
		{"both right", Outcome{Answer: "ANSWER: 3", StopReason: "answered", FollowUps: []Outcome{turn("ANSWER: 6", 1)}}, Passed, []string{}},
		{"follow-up wrong", Outcome{Answer: "ANSWER: 3", StopReason: "answered", FollowUps: []Outcome{turn("ANSWER: 5", 1)}}, Failed,
			[]string{"follow-up 1: no number equal to 6 (found 5)"}},
		{"follow-up without code", Outcome{Answer: "ANSWER: 3", StopReason: "answered", FollowUps: []Outcome{turn("ANSWER: 6", 0)}}, Failed,
			[]string{"follow-up 1: the run never ran code: the answer was not computed from the data"}},
		{"follow-up not asked", Outcome{Answer: "ANSWER: 3", StopReason: "answered"}, Failed,
			[]string{"follow-up 1: not asked: an earlier turn did not answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Judge(run, tt.outcome, 0)
			if r.Status != tt.status || !reflect.DeepEqual(r.Reasons, tt.reasons) {
				t.Errorf("got %s %q, want %s %q", r.Status, r.Reasons, tt.status, tt.reasons)
			}
		})
	}
	bad := `{"question": "q", "followups": [{"question": "", "expect": {}}]}` + "\n"
	if _, err := Parse(strings.NewReader(bad), "s.jsonl", t.TempDir()); err == nil || !strings.Contains(err.Error(), `"followups"[0] has no "question"`) {
		t.Errorf("a follow-up without a question: %v", err)
	}
}
