package kernel

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestScriptMode(t *testing.T) {
	t.Parallel()
	sbx := newSandbox(t)
	s := NewScript(sbx, 4000, 2000)
	ctx := context.Background()

	// Only files survive between runs; a module an earlier step saved can
	// be imported.
	res, err := s.Run(ctx, "x = 1\nopen('helper.py', 'w').write('def double(n):\\n    return 2 * n\\n')", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	res, err = s.Run(ctx, "import helper\nprint(helper.double(21))\nprint('x' in globals())", time.Minute)
	if err != nil || res.ExitCode != 0 || res.Stdout != "42\nFalse\n" {
		t.Fatalf("second run: %+v, %v; want the saved module imported and no variables kept", res, err)
	}

	// A timeout kills the run and says so.
	res, err = s.Run(ctx, "import time\nprint('started', flush=True)\ntime.sleep(60)", 500*time.Millisecond)
	if err != nil || !res.TimedOut || res.ExitCode != 124 || res.Stdout != "started\n" || !strings.Contains(res.Notice, "timeout") {
		t.Fatalf("timed-out run: %+v, %v", res, err)
	}
}
