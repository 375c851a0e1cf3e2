package agent

import (
	"strings"
	"testing"
)

func TestElideKeepsHeadAndTailAndCountsEverythingCut(t *testing.T) {
	s := strings.Repeat("a", 1000) + strings.Repeat("b", 3000) + strings.Repeat("c", 1000)
	once, n := elide(s, 2000)
	if n != 3000 || !strings.HasPrefix(once, strings.Repeat("a", 1000)) || !strings.HasSuffix(once, strings.Repeat("c", 1000)) ||
		!strings.Contains(once, "[terp: 3,000 characters of this output were removed to fit the context window]") {
		t.Fatalf("elide once = %d, %.80q...", n, once)
	}
	twice, n := elide(once, 500)
	if n != 1500 || !strings.Contains(twice, "[terp: 4,500 characters of this output were removed") || strings.Count(twice, "[terp:") != 1 {
		t.Errorf("elide twice = %d, %q", n, twice)
	}
	if same, n := elide(twice, 500); n != 0 || same != twice {
		t.Errorf("elide at the same size changed it: %d", n)
	}
	all, n := elide(twice, 0)
	if n != 500 || strings.TrimSpace(all) != "[terp: 5,000 characters of this output were removed to fit the context window]" {
		t.Errorf("elide to nothing = %d, %q", n, all)
	}
}

func TestShortenOutputKeepsTheJSON(t *testing.T) {
	content := mustJSON(toolResult{ExitCode: 1, Stdout: strings.Repeat("o", 4000), Stderr: strings.Repeat("e", 2000)})
	short, n := shortenOutput(content, 400)
	if n != 4000-300+2000-100 || !strings.HasPrefix(short, `{"exit_code":1,"stdout":"ooo`) {
		t.Errorf("shortenOutput = %d, %s", n, short)
	}
	if same, n := shortenOutput(`{"error":"unknown tool"}`, 0); n != 0 || same != `{"error":"unknown tool"}` {
		t.Errorf("an error message was cut: %s", same)
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 3200: "3,200", 1234567: "1,234,567"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}
