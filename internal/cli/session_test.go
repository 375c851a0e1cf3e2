package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// TestFullDiskEndsNoTurn fills the disk under terp's data directory from the
// code, as a model's code filling /work does, so that the step's save fails.
// The turn goes on with a warning, the record saved before stays whole, and
// once the code frees the space the next save stores everything; the
// conversation is paused and resumes.
func TestFullDiskEndsNoTurn(t *testing.T) {
	data := terptest.SmallDisk(t, 16<<20)
	dataDir := filepath.Join(data, "terp")
	var id string
	stored := func() *store.Conversation {
		t.Helper()
		st, err := store.Open(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			if id, err = st.Latest(); err != nil {
				t.Fatal(err)
			}
		}
		c, err := st.Load(id)
		if err != nil {
			t.Fatalf("the stored record is damaged: %v", err)
		}
		return c
	}
	s := llmtest.New(t,
		llmtest.Fixed(llmtest.RunPython(`import os
fd = os.open("/work/filler", os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(1 << 16))
except OSError as e:
    print("disk full:", e.strerror)
finally:
    os.close(fd)
`)),
		func(req llmtest.Request) llmtest.Reply {
			if res, _ := req.ToolResult(); !strings.Contains(res.Stdout, "No space left on device") {
				t.Errorf("the code did not fill the disk: %s", req.LastTool())
			}
			// Step 1's save failed: the record is the one saved before it.
			if c := stored(); len(c.Messages) != 0 || !c.CodeRan {
				t.Errorf("after the failed save the record holds %d messages (code ran: %v); want the record before step 1", len(c.Messages), c.CodeRan)
			}
			return llmtest.RunPython("open('/work/filler', 'w').close()\nprint('freed')")
		},
		func(req llmtest.Request) llmtest.Reply {
			// Step 2's save found room: it stored step 1 too.
			if c := stored(); len(c.Messages) != 6 {
				t.Errorf("once there is room the record holds %d messages, want the 6 of both steps", len(c.Messages))
			}
			return llmtest.Answer("done")
		},
		func(req llmtest.Request) llmtest.Reply {
			if len(req.Messages) != 8 {
				t.Errorf("the follow-up sent %d messages, want the whole first turn and the question", len(req.Messages))
			}
			return llmtest.Answer("still here")
		})
	env := serverEnv(s)
	env["XDG_DATA_HOME"] = data
	r := terp(t, env, "", "ask", "--json", "-o", t.TempDir(), "fill the disk")
	if got := askJSONOf(t, r); r.code != 0 || got.Answer != "done" {
		t.Fatalf("exit %d, %+v; want the turn answered despite the failed save\nstderr:\n%s", r.code, got, r.stderr)
	}
	for _, want := range []string{"warning: save conversation " + id, "no space left on device", "free space in " + filepath.Join(dataDir, "conversations"),
		"conversation " + id + " is saved again"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if c := stored(); c.Turns != 1 || c.Sandbox.SessionID == "" {
		t.Errorf("stored %d turns, sandbox %q; want the turn and the paused sandbox", c.Turns, c.Sandbox.SessionID)
	}
	wantPausedConversations(t, dataDir)
	if r := terp(t, env, "", "ask", "--json", "-o", t.TempDir(), "-c", "and now?"); r.code != 0 {
		t.Errorf("the follow-up: exit %d\n%s", r.code, r.stderr)
	}
}
