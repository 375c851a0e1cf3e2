package batch

import (
	"reflect"
	"regexp"
	"testing"
)

func TestExpectCheck(t *testing.T) {
	const answer = "December (2025-12) grew the most: revenue rose by 26,450 (14.0%) over November."
	tests := []struct {
		name   string
		expect Expect
		answer string
		saved  []string
		want   []string
	}{
		{name: "nothing expected", answer: answer},
		{name: "contains ignores case", expect: Expect{Contains: []string{"december", "NOVEMBER"}}, answer: answer},
		{
			name:   "contains",
			expect: Expect{Contains: []string{"December", "January"}},
			answer: answer,
			want:   []string{`answer does not contain "January"`},
		},
		{name: "regex", expect: Expect{Regex: regexp.MustCompile(`2025-1[0-2]`)}, answer: answer},
		{
			name:   "regex is case-sensitive",
			expect: Expect{Regex: regexp.MustCompile(`december`)},
			answer: answer,
			want:   []string{`answer does not match the regex "december"`},
		},
		{name: "number with separators", expect: Expect{Number: &Number{Value: 26450}}, answer: answer},
		{name: "percent as written", expect: Expect{Number: &Number{Value: 14, Tolerance: 0.05}}, answer: answer},
		{name: "percent as a fraction", expect: Expect{Number: &Number{Value: 0.14}}, answer: answer},
		{name: "float rounding", expect: Expect{Number: &Number{Value: 0.3, Tolerance: 0.1}}, answer: "0.2"},
		{
			name:   "number",
			expect: Expect{Number: &Number{Value: 12.5, Tolerance: 0.01}},
			answer: "It is 12.7, or 3 at most.",
			want:   []string{"no number within 0.01 of 12.5 (found 12.7, 3)"},
		},
		{
			name:   "exact number",
			expect: Expect{Number: &Number{Value: 7}},
			answer: "seven",
			want:   []string{"no number equal to 7 (the answer has no numbers)"},
		},
		{
			name:   "many numbers",
			expect: Expect{Number: &Number{Value: 100}},
			answer: "1 2 3 4 5 6 7 8 9 10",
			want:   []string{"no number equal to 100 (found 1, 2, 3, 4, 5, 6, 7, 8, … 2 more)"},
		},
		{name: "files", expect: Expect{Files: []string{"chart.txt", "*.csv"}}, answer: "ok", saved: []string{"chart.txt", "out/x.csv", "t.csv"}},
		{
			name:   "missing files",
			expect: Expect{Files: []string{"chart.png", "*.csv"}},
			answer: "ok",
			saved:  []string{"figure_1.png"},
			want:   []string{"file chart.png was not saved (saved: figure_1.png)", "no saved file matches *.csv (saved: figure_1.png)"},
		},
		{
			name:   "no files at all",
			expect: Expect{Files: []string{"chart.png"}},
			answer: "ok",
			want:   []string{"file chart.png was not saved (no files were saved)"},
		},
		{
			name: "every failing expectation has its reason",
			expect: Expect{Contains: []string{"March"}, Regex: regexp.MustCompile(`^\d+$`),
				Number: &Number{Value: 1}, Files: []string{"a.txt"}},
			answer: answer,
			want: []string{`answer does not contain "March"`, `answer does not match the regex "^\\d+$"`,
				"no number equal to 1 (found 2025, 12, 26,450, 14.0%)", "file a.txt was not saved (no files were saved)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Outcome{Answer: tt.answer}
			for _, f := range tt.saved {
				o.Files = append(o.Files, File{SandboxPath: "/work/" + f})
			}
			got := tt.expect.Check("", o)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reasons = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	c := &Case{ID: "c", Line: 3, Expect: Expect{Contains: []string{"42"}, Files: []string{"chart.png"}}}
	run := Run{Case: c, Model: "m", N: 1}
	tests := []struct {
		name    string
		outcome Outcome
		status  Status
		reasons []string
	}{
		{"passed", Outcome{Answer: "42", StopReason: "answered", Files: []File{{SandboxPath: "/work/chart.png", Data: chartPNG(t)}}}, Passed, []string{}},
		{"failed", Outcome{Answer: "41", StopReason: "answered"}, Failed,
			[]string{`answer does not contain "42"`, "file chart.png was not saved (no files were saved)"}},
		{"step cap", Outcome{Answer: "Stopped after 8 steps", StopReason: "max_steps", Steps: 8}, Failed,
			[]string{"no answer within 8 steps: the step cap was reached"}},
		{"time budget", Outcome{Answer: "Stopped", StopReason: "time_budget", Steps: 3}, Failed,
			[]string{"no answer after 3 steps: the time budget (max_time) ran out"}},
		{"empty", Outcome{StopReason: "answered"}, Failed, []string{"the answer is empty"}},
		{"errored", Outcome{StopReason: "error", Err: errString("HTTP 500")}, Errored, []string{"HTTP 500"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Judge(run, tt.outcome, 1500e6)
			if r.Status != tt.status || !reflect.DeepEqual(r.Reasons, tt.reasons) {
				t.Errorf("got %s %q, want %s %q", r.Status, r.Reasons, tt.status, tt.reasons)
			}
			if r.ID != "c" || r.Model != "m" || r.Run != 1 || r.Line != 3 || r.DurationMS != 1500 || r.Files == nil {
				t.Errorf("result = %+v", r)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }
