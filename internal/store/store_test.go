package store_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/store/storetest"
	"github.com/terpdev/terp/internal/terptest"
)

func newStore(t *testing.T) *store.Dir {
	t.Helper()
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDir runs the conformance suite on the directory: a second process
// opens the same data directory, and a record is damaged by cutting its file
// short, as a disk that filled up under another tool would.
func TestDir(t *testing.T) {
	storetest.Run(t, storetest.Config{
		Open: func(t *testing.T) store.Store { return newStore(t) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			d, err := store.Open(filepath.Dir(s.Where()))
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Damage: func(t *testing.T, s store.Store, id string) {
			path := filepath.Join(s.Where(), id, "conversation.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b[:len(b)/2], 0o600); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// A save writes the record through a temporary file beside it, and leaves
// none behind.
func TestSaveLeavesNoTemporaryFiles(t *testing.T) {
	s := newStore(t)
	c := store.New(store.NewID(), "ask", "q", store.Settings{}, "local")
	c.Messages = []llm.Message{{Role: llm.RoleUser, Content: "q"}}
	for range 3 {
		if err := s.Save(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutInput(c.ID, "a.csv", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(s.Where(), c.ID), s.InputsDir(c.ID)} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("left behind: %s", filepath.Join(dir, e.Name()))
			}
		}
	}
}

// A save on a full disk fails and leaves the record saved before whole, with
// no half-written file taking what space is left; once there is room again,
// the next save lands.
func TestSaveOnAFullDiskKeepsTheRecordBefore(t *testing.T) {
	s, err := store.Open(terptest.SmallDisk(t, 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	c := store.New(store.NewID(), "ask", "q", store.Settings{Model: "m"}, "local")
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

// A conversation this process has just let go of can be taken again at
// once, though children are being started meanwhile: between its fork and
// its exec, a child holds a copy of the lock file's descriptor (terp serve
// starts sandboxes for other containers while it removes one).
func TestLockAgainWhileChildrenStart(t *testing.T) {
	s, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_ = exec.Command("true").Run()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	id := store.NewID()
	for i := range 300 {
		l, err := s.Lock(id)
		if err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}
