package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/terptest"
)

func newStore(t *testing.T) *Dir {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	c := New(NewID(), "ask", "Plot revenue per month\nand more", Settings{Model: "qwen3-32b", ExecMode: "kernel", MaxSteps: 8}, "local")
	c.Sandbox.SessionID = "0123456789ab"
	c.Messages = []llm.Message{
		{Role: llm.RoleSystem, Content: "You are a data analyst."},
		{Role: llm.RoleUser, Content: "Plot revenue"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "run_python", Arguments: `{"code":"print(1)"}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", Content: `{"exit_code":0,"stdout":"1\n"}`},
		{Role: llm.RoleAssistant, Content: "It is 1."},
	}
	c.Inputs = []File{{Name: "sales.csv", Path: "/home/u/sales.csv", Bytes: 220}}
	c.Usage = llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	c.Steps, c.Turns = 2, 1
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
	got.Updated, c.Updated = time.Time{}, time.Time{}
	got.Created, c.Created = got.Created.UTC(), c.Created.UTC()
	if !reflect.DeepEqual(got, c) {
		t.Errorf("loaded %+v\nwant %+v", got, c)
	}
	// No temporary files are left beside the record.
	entries, _ := os.ReadDir(filepath.Join(s.Where(), c.ID))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestPrefixIDs(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"abc123000000", "abc456000000", "def000000000"} {
		if err := s.Save(New(id, "ask", "q", Settings{}, "local")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix, want, err string
	}{
		{"abc123000000", "abc123000000", ""},
		{"abc1", "abc123000000", ""},
		{"D", "def000000000", ""},
		{"abc", "", "ambiguous"},
		{"fff", "", "no such conversation"},
		{"", "", "no such conversation"},
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

func TestDamagedRecordDoesNotBreakTheListing(t *testing.T) {
	s := newStore(t)
	good := New("aaaaaaaaaaaa", "ask", "good one", Settings{}, "local")
	if err := s.Save(good); err != nil {
		t.Fatal(err)
	}
	bad := New("bbbbbbbbbbbb", "ask", "bad one", Settings{}, "local")
	if err := s.Save(bad); err != nil {
		t.Fatal(err)
	}
	// A record cut short, as by a disk that filled up under another tool.
	path := filepath.Join(s.Where(), bad.ID, "conversation.json")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("listed %d conversations, want both", len(entries))
	}
	var damaged *DamagedError
	for _, e := range entries {
		switch e.ID {
		case good.ID:
			if e.Err != nil || e.Conversation.Title != "good one" {
				t.Errorf("good conversation listed as %+v", e)
			}
		case bad.ID:
			if !errors.As(e.Err, &damaged) {
				t.Errorf("damaged conversation listed with error %v", e.Err)
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
}

func TestSecondLockIsRefused(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Lock(id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Lock(id)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second Lock = %v; want ErrBusy naming the holder", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Lock(id)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	l2.Unlock()
}

func TestListOrderAndRemove(t *testing.T) {
	s := newStore(t)
	older := New("111111111111", "ask", "older", Settings{}, "local")
	newer := New("222222222222", "chat", "newer", Settings{}, "local")
	if err := s.Save(older); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // Updated must differ
	if err := s.Save(newer); err != nil {
		t.Fatal(err)
	}
	entries, _ := s.List()
	if len(entries) != 2 || entries[0].ID != newer.ID {
		t.Fatalf("list = %+v, want the newer first", entries)
	}
	if err := s.Remove(newer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(newer.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load after Remove: %v", err)
	}
	if err := s.Remove("../../etc"); err == nil {
		t.Error("Remove accepted a path")
	}
}

// A save on a full disk fails and leaves the record saved before whole, with
// no half-written file taking what space is left; once there is room again,
// the next save lands.
func TestSaveOnAFullDiskKeepsTheRecordBefore(t *testing.T) {
	s, err := Open(terptest.SmallDisk(t, 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	c := New(NewID(), "ask", "q", Settings{Model: "m"}, "local")
	c.Messages = []llm.Message{{Role: llm.RoleUser, Content: "q"}}
	if err := s.Save(c); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(s.Where(), "filler")
	fill(t, filler)

	c.Messages = append(c.Messages, llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("a long answer ", 1000)})
	err = s.Save(c)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), c.ID) {
		t.Fatalf("save on a full disk = %v, want ENOSPC naming the conversation", err)
	}
	got, err := s.Load(c.ID)
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("after the failed save: %v, %+v; want the record before, with its one message", err, got)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Where(), c.ID))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("the failed save left %s behind", e.Name())
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(c); err != nil {
		t.Fatalf("save once there is room: %v", err)
	}
	if got, err := s.Load(c.ID); err != nil || len(got.Messages) != 2 {
		t.Errorf("after the save with room: %v, %d messages; want 2", err, len(got.Messages))
	}
}

// fill writes path until the disk it is on is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
