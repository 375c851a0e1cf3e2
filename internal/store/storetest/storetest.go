// Package storetest is the conformance suite every store.Store passes: the
// directory and PostgreSQL run the same checks, so a conversation behaves
// alike wherever it is kept.
package storetest

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/store"
)

// Config is how the suite reaches a Store.
type Config struct {
	// Open returns a new, empty store; each subtest opens its own.
	Open func(t *testing.T) store.Store
	// Reopen opens the store s again, as another terp process (or another
	// replica of terp serve) would: the same conversations, its own locks.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Damage spoils the record of the conversation id in the way the
	// store's medium can be spoiled (a file cut short, a row of the wrong
	// shape). Without it the damage test is skipped.
	Damage func(t *testing.T, s store.Store, id string)
}

// Run checks the Store that cfg opens.
func Run(t *testing.T, cfg Config) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, cfg.Open(t)) })
	t.Run("PrefixIDs", func(t *testing.T) { testPrefixIDs(t, cfg.Open(t)) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, cfg.Open(t)) })
	t.Run("ListOrderAndRemove", func(t *testing.T) { testListOrderAndRemove(t, cfg.Open(t)) })
	t.Run("Damaged", func(t *testing.T) {
		if cfg.Damage == nil {
			t.Skip("the store cannot be damaged from outside")
		}
		testDamaged(t, cfg.Open(t), cfg.Damage)
	})
	t.Run("SecondLockIsRefused", func(t *testing.T) { testSecondLock(t, cfg.Open(t)) })
	t.Run("Inputs", func(t *testing.T) { testInputs(t, cfg.Open(t)) })
	t.Run("Reopen", func(t *testing.T) {
		if cfg.Reopen == nil {
			t.Skip("the store cannot be opened twice")
		}
		testReopen(t, cfg.Open(t), cfg.Reopen)
	})
}

func testRoundTrip(t *testing.T, s store.Store) {
	c := store.New(store.NewID(), "ask", "Plot revenue per month\nand more", store.Settings{Model: "qwen3-32b", ExecMode: "kernel", MaxSteps: 8, Network: "allowlist", NetworkAllow: []string{"pypi.org"}}, "local")
	c.Sandbox.SessionID = "0123456789ab"
	c.Messages = []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a data analyst."},
		{Role: llm.RoleUser, Content: "Plot revenue"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "run_python", Arguments: `{"code":"print(1)"}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", Content: "{\"exit_code\":0,\"stdout\":\"1\\n\"}\x00binary output\x00"},
		{Role: llm.RoleAssistant, Content: "It is 1 – or ½, \u2028 \"quoted\" \\ <b>."},
	}
	c.Inputs = []store.File{{Name: "sales.csv", Path: "/home/u/sales.csv", Bytes: 220}}
	c.Downloads = []store.File{{Name: "plot.png", Path: "/home/u/plot.png", Bytes: 1000}}
	c.Usage = llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	c.Steps, c.Turns, c.CodeRan = 2, 1, true
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "Plot revenue per month" {
		t.Errorf("title = %q, want the first line of the question", got.Title)
	}
	if !got.Updated.Equal(c.Updated) {
		t.Errorf("updated = %v, want %v, the time of the save", got.Updated, c.Updated)
	}
	got.Updated, c.Updated = time.Time{}, time.Time{}
	got.Created, c.Created = got.Created.UTC(), c.Created.UTC()
	if !reflect.DeepEqual(got, c) {
		t.Errorf("loaded %+v\nwant %+v", got, c)
	}
}

func testPrefixIDs(t *testing.T, s store.Store) {
	for _, id := range []string{"abc123000000", "abc456000000", "def000000000"} {
		if err := s.Save(store.New(id, "ask", "q", store.Settings{}, "local")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix, want, err string
	}{
		{"abc123000000", "abc123000000", ""},
		{"abc1", "abc123000000", ""},
		{" D", "def000000000", ""},
		{"abc", "", `"abc" is ambiguous: it starts abc123000000, abc456000000`},
		{"fff", "", "no such conversation"},
		{"", "", "no such conversation"},
		{"%", "", "no such conversation"},
		{"_", "", "no such conversation"},
	}
	for _, tt := range tests {
		got, err := s.Resolve(tt.prefix)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%q) = %q, %v; want an error saying %q", tt.prefix, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.prefix, got, err, tt.want)
		}
	}
}

func testNotFound(t *testing.T, s store.Store) {
	if _, err := s.Latest(); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Latest of an empty store: %v; want ErrNotFound", err)
	}
	if _, err := s.Load("0123456789ab"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load of a missing conversation: %v; want ErrNotFound", err)
	}
	if entries, err := s.List(); err != nil || len(entries) != 0 {
		t.Errorf("List of an empty store = %+v, %v", entries, err)
	}
	if s.Where() == "" {
		t.Error("Where names nothing")
	}
}

func testListOrderAndRemove(t *testing.T, s store.Store) {
	older := store.New("111111111111", "ask", "older", store.Settings{}, "local")
	newer := store.New("222222222222", "chat", "newer", store.Settings{}, "local")
	if err := s.Save(newer); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // Updated must differ
	if err := s.Save(older); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := s.Save(newer); err != nil { // active again: first
		t.Fatal(err)
	}
	entries, err := s.List()
	if err != nil || len(entries) != 2 || entries[0].ID != newer.ID || entries[1].ID != older.ID {
		t.Fatalf("list = %+v, %v; want the one saved last first", entries, err)
	}
	if entries[0].Err != nil || entries[0].Conversation.Title != "newer" {
		t.Errorf("listed %+v", entries[0])
	}
	if id, err := s.Latest(); err != nil || id != newer.ID {
		t.Errorf("Latest = %q, %v; want %s", id, err, newer.ID)
	}
	if err := s.Remove(newer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(newer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Load after Remove: %v", err)
	}
	if entries, _ := s.List(); len(entries) != 1 || entries[0].ID != older.ID {
		t.Errorf("list after Remove = %+v", entries)
	}
	if err := s.Remove("../../etc"); err == nil {
		t.Error("Remove accepted a path")
	}
}

func testDamaged(t *testing.T, s store.Store, damage func(t *testing.T, s store.Store, id string)) {
	good := store.New("aaaaaaaaaaaa", "ask", "good one", store.Settings{}, "local")
	bad := store.New("bbbbbbbbbbbb", "ask", "bad one", store.Settings{}, "local")
	if err := s.Save(good); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := s.Save(bad); err != nil { // the newer: Latest must pass over it
		t.Fatal(err)
	}
	damage(t, s, bad.ID)
	entries, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("listed %d conversations, want both", len(entries))
	}
	var damaged *store.DamagedError
	for _, e := range entries {
		switch e.ID {
		case good.ID:
			if e.Err != nil || e.Conversation.Title != "good one" {
				t.Errorf("good conversation listed as %+v", e)
			}
		case bad.ID:
			if !errors.As(e.Err, &damaged) || e.Conversation != nil {
				t.Errorf("damaged conversation listed as %+v", e)
			}
		}
	}
	_, err = s.Load(bad.ID)
	if !errors.As(err, &damaged) || !strings.Contains(err.Error(), "terp sessions rm "+bad.ID) {
		t.Errorf("Load of a damaged record: %v; want a DamagedError that says how to remove it", err)
	}
	if id, err := s.Latest(); err != nil || id != good.ID {
		t.Errorf("Latest = %q, %v; want the readable one", id, err)
	}
	if err := s.Remove(bad.ID); err != nil {
		t.Errorf("Remove of a damaged conversation: %v", err)
	}
}

func testSecondLock(t *testing.T, s store.Store) {
	id, other := store.NewID(), store.NewID()
	l, err := s.Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Lock(id)
	if !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "pid") || !strings.Contains(err.Error(), id) {
		t.Fatalf("second Lock = %v; want ErrBusy naming the conversation and the holder", err)
	}
	lo, err := s.Lock(other)
	if err != nil {
		t.Fatalf("Lock of another conversation: %v", err)
	}
	if err := lo.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Lock(id)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// failingReader gives some bytes, then fails, as an upload cut off midway.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("the connection was cut")
	}
	n := min(len(p), r.n)
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.n -= n
	return n, nil
}

func testInputs(t *testing.T, s store.Store) {
	c := store.New(store.NewID(), "ask", "q", store.Settings{}, "local")
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasInputs(c.ID); err != nil || has {
		t.Fatalf("HasInputs before any upload = %v, %v", has, err)
	}
	if _, err := s.OpenInput(c.ID, "sales.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenInput of no upload: %v; want fs.ErrNotExist", err)
	}
	// Larger than any one chunk or buffer a store may use.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7)
	n, err := s.PutInput(c.ID, "sales.csv", bytes.NewReader(big))
	if err != nil || n != int64(len(big)) {
		t.Fatalf("PutInput = %d, %v; want %d", n, err, len(big))
	}
	if got := readInput(t, s, c.ID, "sales.csv"); !bytes.Equal(got, big) {
		t.Fatalf("read back %d bytes, not the %d put", len(got), len(big))
	}
	// A copy that fails midway leaves the earlier one whole.
	if _, err := s.PutInput(c.ID, "sales.csv", &failingReader{n: 1 << 20}); err == nil {
		t.Fatal("PutInput of a failing reader succeeded")
	}
	if got := readInput(t, s, c.ID, "sales.csv"); !bytes.Equal(got, big) {
		t.Fatalf("after a failed replacement: %d bytes, want the %d of the earlier copy", len(got), len(big))
	}
	if n, err := s.PutInput(c.ID, "sales.csv", strings.NewReader("a,b\n")); err != nil || n != 4 {
		t.Fatalf("replacing PutInput = %d, %v", n, err)
	}
	if got := readInput(t, s, c.ID, "sales.csv"); string(got) != "a,b\n" {
		t.Fatalf("after a replacement: %q", got)
	}
	if _, err := s.PutInput(c.ID, "empty.txt", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if got := readInput(t, s, c.ID, "empty.txt"); len(got) != 0 {
		t.Fatalf("an empty upload reads %q", got)
	}
	if has, err := s.HasInputs(c.ID); err != nil || !has {
		t.Fatalf("HasInputs after uploads = %v, %v", has, err)
	}
	for _, name := range []string{"sales.csv", "empty.txt", "never.txt"} {
		if err := s.RemoveInput(c.ID, name); err != nil {
			t.Fatalf("RemoveInput(%s): %v", name, err)
		}
	}
	if has, err := s.HasInputs(c.ID); err != nil || has {
		t.Fatalf("HasInputs after removing them = %v, %v", has, err)
	}
	// Kept before the record is saved (the first upload of a new
	// conversation), and removed with the conversation.
	early := store.NewID()
	if _, err := s.PutInput(early, "a.txt", strings.NewReader("a")); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasInputs(early); err != nil || !has {
		t.Fatalf("HasInputs of a conversation not yet saved = %v, %v", has, err)
	}
	if err := s.Save(store.New(early, "ask", "q", store.Settings{}, "local")); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(early); err != nil {
		t.Fatal(err)
	}
	if has, err := s.HasInputs(early); err != nil || has {
		t.Fatalf("HasInputs after Remove = %v, %v", has, err)
	}
}

func readInput(t *testing.T, s store.Store, id, name string) []byte {
	t.Helper()
	rc, err := s.OpenInput(id, name)
	if err != nil {
		t.Fatalf("OpenInput(%s): %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// testReopen: a second process sees the first's conversations and uploads
// and is refused the conversations it holds.
func testReopen(t *testing.T, s store.Store, reopen func(t *testing.T, s store.Store) store.Store) {
	c := store.New(store.NewID(), "chat", "shared", store.Settings{Model: "m"}, "docker")
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutInput(c.ID, "in.txt", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	other := reopen(t, s)
	got, err := other.Load(c.ID)
	if err != nil || got.Title != "shared" {
		t.Fatalf("Load from the other process = %+v, %v", got, err)
	}
	if id, err := other.Resolve(c.ID[:6]); err != nil || id != c.ID {
		t.Errorf("Resolve from the other process = %q, %v", id, err)
	}
	if b := readInput(t, other, c.ID, "in.txt"); string(b) != "kept" {
		t.Errorf("the other process reads the upload as %q", b)
	}
	if _, err := other.Lock(c.ID); !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("Lock from the other process while held = %v; want ErrBusy naming the holder", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Lock(c.ID)
	if err != nil {
		t.Fatalf("Lock from the other process once released: %v", err)
	}
	if _, err := s.Lock(c.ID); !errors.Is(err, store.ErrBusy) {
		t.Errorf("Lock from the first process while the other holds it = %v; want ErrBusy", err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
}
