package agent

import (
	"strings"
	"testing"
)

// The code of a run_python call comes out of its arguments piece by piece,
// wherever the server cut them, exactly as the whole arguments decode.
func TestCodeStream(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   string
	}{
		{"whole", []string{`{"code": "print(1)"}`}, "print(1)"},
		{"piece by piece", []string{`{"co`, `de"`, ` : `, `"pri`, `nt(1)`, `"}`}, "print(1)"},
		{"escapes", []string{`{"code": "a\nb\t\"c\" \\ \/"}`}, "a\nb\t\"c\" \\ /"},
		{"cut after a backslash", []string{`{"code": "a\`, `nb\`, `\"}`}, "a\nb\\"},
		{"cut inside \\u", []string{`{"code": "caf\u00`, `e9 \u`, `00e9"}`}, "café é"},
		{"surrogate pair cut", []string{`{"code": "\ud83d`, `\ude00"}`}, "😀"},
		{"surrogate pair cut after its backslash", []string{`{"code": "\ud83d\`, `ude00!"}`}, "😀!"},
		{"lone high surrogate", []string{`{"code": "\ud83dx"}`}, "\uFFFDx"},
		{"high surrogate then newline", []string{`{"code": "\ud83d\n"}`}, "\uFFFD\n"},
		{"raw UTF-8", []string{`{"code": "print('é')"}`}, "print('é')"},
		{"whitespace", []string{"{\n  \"code\"\n  :\n  \"x = 1\"\n}"}, "x = 1"},
		{"code key not first", []string{`{"timeout": 5, "note": "the code", "code": "x"}`}, "x"},
		{"code inside another value", []string{`{"opts": {"code": "no"}, "code": "yes"}`}, "yes"},
		{"a value that reads \"code\"", []string{`{"note": "code", "code": "yes"}`}, "yes"},
		{"an escaped quote in an earlier value", []string{`{"note": "say \"code\": \"no\"", "code": "yes"}`}, "yes"},
		{"stops at the closing quote", []string{`{"code": "a", "more": "b"}`}, "a"},
		{"code not a string", []string{`{"code": 5}`}, ""},
		{"no code", []string{`{"script": "x"}`}, ""},
		{"a bare string", []string{`"print(1)"`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s codeStream
			var got strings.Builder
			for _, p := range tt.pieces {
				got.WriteString(s.feed(p))
			}
			if got.String() != tt.want {
				t.Errorf("code = %q, want %q", got.String(), tt.want)
			}
		})
	}
}

// However the arguments are cut, byte by byte included, the code is the
// same.
func TestCodeStreamAnyCut(t *testing.T) {
	args := `{"note": "x", "code": "print(\"caf\u00e9 \ud83d\ude00\")\n\tif a:\\\n"}`
	want := "print(\"café 😀\")\n\tif a:\\\n"
	for cut := 1; cut < len(args); cut++ {
		var s codeStream
		got := s.feed(args[:cut]) + s.feed(args[cut:])
		if got != want {
			t.Errorf("cut at %d (%q|%q): code = %q, want %q", cut, args[:cut], args[cut:], got, want)
		}
	}
	var s codeStream
	var got strings.Builder
	for i := range len(args) {
		got.WriteString(s.feed(args[i : i+1]))
	}
	if got.String() != want {
		t.Errorf("byte by byte: code = %q, want %q", got.String(), want)
	}
}
