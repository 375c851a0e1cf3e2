package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/terptest"
)

// TestFullDiskEndsNoTurn fills the disk under terp's data directory from the
// code, as a model's code filling /work does, so that the step's save fails.
// The turn goes on with a warning, the record saved before stays whole, and
// once there is room again (the filler is emptied from outside, so that the
// next step meets no full disk of its own) the next save stores everything;
// the conversation is paused and resumes.
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
			// Step 1's save failed: the record is the one saved before it,
			// with the question (saved before the first model call).
			if c := stored(); len(c.Messages) != 2 || !c.CodeRan {
				t.Errorf("after the failed save the record holds %d messages (code ran: %v); want the 2 saved before step 1", len(c.Messages), c.CodeRan)
			}
			filler, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "*", "work", "filler"))
			if len(filler) != 1 || os.Truncate(filler[0], 0) != nil {
				t.Errorf("cannot empty the filler %v", filler)
			}
			return llmtest.RunPython("print('room again')")
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
	warnings := strings.Join(askJSONOf(t, r).Warnings, "\n")
	for _, want := range []string{"save conversation " + id, "no space left on device", "free space in " + filepath.Join(dataDir, "conversations"),
		"conversation " + id + " is saved again"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("the warnings do not say %q: %s", want, warnings)
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

// errInjected is the sandbox failure faultyBackend injects.
var errInjected = errors.New("injected: the sandbox cannot list /work")

// faultyBackend is the real local backend whose sandboxes fail to list /work
// once armed: the sandbox error a step or an upload meets after its code ran
// or its file landed. A write of armOn arms it.
type faultyBackend struct {
	sandbox.Backend
	armed *atomic.Bool
	armOn string
}

func (b faultyBackend) Create(ctx context.Context, opt sandbox.Options) (sandbox.Sandbox, error) {
	sbx, err := b.Backend.Create(ctx, opt)
	if err != nil {
		return nil, err
	}
	return faultySandbox{sbx, b}, nil
}

func (b faultyBackend) Resume(ctx context.Context, id sandbox.SessionID) (sandbox.Sandbox, error) {
	sbx, err := b.Backend.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return faultySandbox{sbx, b}, nil
}

type faultySandbox struct {
	sandbox.Sandbox
	b faultyBackend
}

func (s faultySandbox) WriteFile(ctx context.Context, path string, r io.Reader) error {
	err := s.Sandbox.WriteFile(ctx, path, r)
	if path == s.b.armOn {
		s.b.armed.Store(true)
	}
	return err
}

func (s faultySandbox) List(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	if s.b.armed.Load() {
		return nil, errInjected
	}
	return s.Sandbox.List(ctx, dir)
}

// TestErrorKeepsTheConversation makes a step or an upload fail with a
// sandbox error after the code ran or the file landed, before any step was
// saved: the conversation, its sandbox and its files must survive the error,
// and go on at the next question.
func TestErrorKeepsTheConversation(t *testing.T) {
	const writeResult = "open('/work/result.txt', 'w').write('computed')"
	tests := []struct {
		name   string
		upload bool
		armOn  string // the write that arms the fault; "" arms it as the model asks for code
		files  string // what the follow-up finds in /work
	}{
		{"the step after an upload", true, "", "['important.csv', 'result.txt']"},
		{"the step without an upload", false, "", "['result.txt']"},
		{"the upload", true, "/work/important.csv", "['important.csv']"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			armed := &atomic.Bool{}
			var steps []llmtest.Step
			if tt.armOn == "" {
				steps = append(steps, func(llmtest.Request) llmtest.Reply {
					armed.Store(true)
					return llmtest.RunPython(writeResult)
				})
			}
			s := llmtest.New(t, append(steps,
				llmtest.Fixed(llmtest.RunPython("import os\nprint(sorted(f for f in os.listdir('/work') if not f.startswith('.')))")),
				answerWithStdout)...)
			env, dataDir := sharedEnv(t, s)
			args := []string{"ask", "--json", "-o", t.TempDir()}
			if tt.upload {
				csv := filepath.Join(t.TempDir(), "important.csv")
				if err := os.WriteFile(csv, []byte("id,value\n1,42\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", csv)
			}
			faulty := func(f *Factory) {
				real := f.NewBackend
				f.NewBackend = func(cfg *config.Config) (sandbox.Backend, error) {
					b, err := real(cfg)
					return faultyBackend{Backend: b, armed: armed, armOn: tt.armOn}, err
				}
			}
			r := terpWith(t, faulty, env, "", append(args, "compute")...)
			got := askJSONOf(t, r)
			if r.code != exitError || !strings.Contains(got.Error, errInjected.Error()) {
				t.Fatalf("exit %d, %+v; want the injected error\nstderr:\n%s", r.code, got, r.stderr)
			}
			st, _ := store.Open(dataDir)
			c, err := st.Load(got.ConversationID)
			if err != nil {
				t.Fatalf("the conversation was removed by the error: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dataDir, "sandboxes", c.Sandbox.SessionID, "work")); err != nil {
				t.Fatalf("its sandbox was removed: %v", err)
			}
			if tt.upload {
				if _, err := os.Stat(filepath.Join(st.InputsDir(c.ID), "important.csv")); err != nil {
					t.Errorf("the copy of the upload was removed: %v", err)
				}
			}
			wantPausedConversations(t, dataDir)

			next := askJSONOf(t, terp(t, env, "", "ask", "--json", "-o", t.TempDir(), "--resume", c.ID, "what is there?"))
			if next.ConversationID != c.ID || next.Answer != tt.files {
				t.Errorf("the follow-up = %+v; want conversation %s going on with %s in /work", next, c.ID, tt.files)
			}
		})
	}
}
