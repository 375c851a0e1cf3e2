// Package statetest is the conformance suite every state.State passes: the
// directory and PostgreSQL run the same checks.
package statetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/serve/state"
)

// Run checks the State that open returns; each subtest opens its own.
// reopen, when not nil, opens the same state again (a restarted server).
func Run(t *testing.T, open func(t *testing.T) state.State, reopen func(t *testing.T, st state.State) state.State) {
	ctx := context.Background()
	t.Run("Files", func(t *testing.T) {
		st := open(t)
		now := time.Now().Truncate(time.Second)
		a, err := st.PutFile(ctx, state.File{ID: "file-a", Owner: "alice", Filename: "a.csv", Purpose: "user_data", CreatedAt: now}, strings.NewReader("x,y\n1,2\n"), 1<<20)
		if err != nil || a.Bytes != 8 {
			t.Fatalf("PutFile = %+v, %v; want 8 bytes", a, err)
		}
		if _, err := st.PutFile(ctx, state.File{ID: "file-b", Owner: "alice", Filename: "b", CreatedAt: now.Add(time.Second)}, strings.NewReader("0123456789"), 4); !errors.Is(err, state.ErrTooLarge) {
			t.Fatalf("a file over the bound: %v; want ErrTooLarge", err)
		}
		if _, err := st.File(ctx, "alice", "file-b"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("the refused file is there: %v", err)
		}
		if _, err := st.PutFile(ctx, state.File{ID: "file-c", Owner: "alice", Filename: "c", CreatedAt: now.Add(time.Second)}, strings.NewReader("c"), 4); err != nil {
			t.Fatal(err)
		}
		if _, err := st.File(ctx, "bob", "file-a"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob sees alice's file: %v", err)
		}
		got, err := st.File(ctx, "alice", "file-a")
		if err != nil || got.Filename != "a.csv" || got.Bytes != 8 || !got.CreatedAt.Equal(now) {
			t.Fatalf("File = %+v, %v", got, err)
		}
		rc, err := st.OpenFile(ctx, got)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "x,y\n1,2\n" {
			t.Fatalf("content %q", b)
		}
		list, err := st.Files(ctx, "alice")
		if err != nil || len(list) != 2 || list[0].ID != "file-c" || list[1].ID != "file-a" {
			t.Fatalf("Files = %+v, %v; want c then a", list, err)
		}
		if list, _ := st.Files(ctx, "bob"); len(list) != 0 {
			t.Fatalf("bob lists %+v", list)
		}
		if err := st.DeleteFile(ctx, "bob", "file-a"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob deleted alice's file: %v", err)
		}
		if err := st.DeleteFile(ctx, "alice", "file-a"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.File(ctx, "alice", "file-a"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a deleted file is there: %v", err)
		}
		if reopen != nil {
			st = reopen(t, st)
			if f, err := st.File(ctx, "alice", "file-c"); err != nil || f.Bytes != 1 {
				t.Fatalf("after a restart: %+v, %v", f, err)
			}
		}
	})
	t.Run("Containers", func(t *testing.T) {
		st := open(t)
		now := time.Now().Truncate(time.Millisecond)
		c := state.Container{ID: "cntr_1", Owner: "alice", Name: "one", CreatedAt: now, LastActive: now, Minutes: 20, Memory: "1g",
			Network: state.Network{Type: "allowlist", AllowedDomains: []string{"pypi.org"}}, Conversation: "0123456789ab",
			Files: map[string]string{"a.csv": "cfile_1"}, User: []string{"a.csv"}, Replica: "http://10.0.0.1:8080"}
		if err := st.SaveContainer(ctx, c); err != nil {
			t.Fatal(err)
		}
		c2 := c
		c2.ID, c2.CreatedAt, c2.Owner = "cntr_2", now.Add(time.Second), "bob"
		if err := st.SaveContainer(ctx, c2); err != nil {
			t.Fatal(err)
		}
		c.Last, c.LastActive = "resp_1", now.Add(time.Minute)
		if err := st.SaveContainer(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := st.Container(ctx, "alice", "cntr_1")
		if err != nil || !same(got, c) {
			t.Fatalf("Container = %+v, %v; want %+v", got, err, c)
		}
		if _, err := st.Container(ctx, "bob", "cntr_1"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob sees alice's container: %v", err)
		}
		all, err := st.Containers(ctx, "")
		if err != nil || len(all) != 2 || all[0].ID != "cntr_2" {
			t.Fatalf("Containers(all) = %+v, %v", all, err)
		}
		mine, _ := st.Containers(ctx, "alice")
		if len(mine) != 1 || mine[0].ID != "cntr_1" {
			t.Fatalf("Containers(alice) = %+v", mine)
		}
		if err := st.DeleteContainer(ctx, "bob", "cntr_1"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob deleted alice's container: %v", err)
		}
		if reopen != nil {
			st = reopen(t, st)
			if got, err := st.Container(ctx, "alice", "cntr_1"); err != nil || !same(got, c) {
				t.Fatalf("after a restart: %+v, %v", got, err)
			}
		}
		if err := st.DeleteContainer(ctx, "alice", "cntr_1"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Container(ctx, "alice", "cntr_1"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a deleted container is there: %v", err)
		}
	})
	t.Run("Responses", func(t *testing.T) {
		st := open(t)
		base := time.Now()
		for i := range 5 {
			r := state.Response{ID: fmt.Sprintf("resp_%d", i), Owner: "alice", Container: "cntr_1", CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
				Object: json.RawMessage(fmt.Sprintf(`{"id":"resp_%d"}`, i)), History: json.RawMessage(`[{"role":"user","content":"hi"}]`)}
			if err := st.SaveResponse(ctx, r, 3); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []bool{false, false, true, true, true} {
			_, err := st.Response(ctx, "alice", fmt.Sprintf("resp_%d", i))
			if (err == nil) != want {
				t.Errorf("resp_%d kept = %v, want %v (the 3 newest are kept)", i, err == nil, want)
			}
		}
		got, err := st.Response(ctx, "alice", "resp_4")
		if err != nil || got.Container != "cntr_1" || string(got.History) != `[{"role":"user","content":"hi"}]` {
			t.Fatalf("Response = %+v, %v", got, err)
		}
		var obj map[string]string
		if json.Unmarshal(got.Object, &obj) != nil || obj["id"] != "resp_4" {
			t.Fatalf("object %s", got.Object)
		}
		if _, err := st.Response(ctx, "bob", "resp_4"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob sees alice's response: %v", err)
		}
		if _, err := st.Response(ctx, "alice", "../../x"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a path as an id: %v", err)
		}
		if err := st.DeleteResponse(ctx, "bob", "resp_4"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("bob deleted alice's response: %v", err)
		}
		if reopen != nil {
			st = reopen(t, st)
		}
		if err := st.DeleteResponse(ctx, "alice", "resp_4"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Response(ctx, "alice", "resp_4"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("a deleted response is there: %v", err)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		st := open(t)
		if n, err := st.AddUsage(ctx, "alice", "2026-12-01", 100); err != nil || n != 100 {
			t.Fatalf("AddUsage = %d, %v", n, err)
		}
		if n, _ := st.AddUsage(ctx, "alice", "2026-12-01", 50); n != 150 {
			t.Fatalf("AddUsage = %d, want 150", n)
		}
		if n, _ := st.AddUsage(ctx, "alice", "2026-12-02", 7); n != 7 {
			t.Fatalf("a new day starts at %d", n)
		}
		if n, _ := st.Usage(ctx, "bob", "2026-12-01"); n != 0 {
			t.Fatalf("bob has alice's usage: %d", n)
		}
		if reopen != nil {
			st = reopen(t, st)
		}
		if n, err := st.Usage(ctx, "alice", "2026-12-01"); err != nil || n != 150 {
			t.Fatalf("Usage = %d, %v; want 150", n, err)
		}
		if err := st.Check(ctx); err != nil {
			t.Fatalf("Check: %v", err)
		}
	})
	t.Run("Gone", func(t *testing.T) {
		st := open(t)
		day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		if err := st.AddGone(ctx, "alice", []string{"a1", "a2"}, day, day.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if reopen != nil {
			st = reopen(t, st)
		}
		for _, c := range []struct {
			owner, digest string
			want          bool
		}{{"alice", "a1", true}, {"alice", "a2", true}, {"alice", "a3", false}, {"bob", "a1", false}} {
			if got, err := st.Gone(ctx, c.owner, c.digest); err != nil || got != c.want {
				t.Errorf("Gone(%s, %s) = %v, %v; want %v", c.owner, c.digest, got, err, c.want)
			}
		}
		// A later removal forgets what is older than its forget.
		if err := st.AddGone(ctx, "alice", []string{"a3"}, day.Add(48*time.Hour), day.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for digest, want := range map[string]bool{"a1": false, "a3": true} {
			if got, err := st.Gone(ctx, "alice", digest); err != nil || got != want {
				t.Errorf("after forgetting: Gone(alice, %s) = %v, %v; want %v", digest, got, err, want)
			}
		}
	})
	t.Run("Requests", func(t *testing.T) {
		st := open(t)
		t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		take := func(owner string, at time.Duration) (time.Duration, bool) {
			t.Helper()
			wait, ok, err := st.TakeRequest(ctx, owner, 3, t0.Add(at))
			if err != nil {
				t.Fatal(err)
			}
			return wait, ok
		}
		for i := range 3 {
			if _, ok := take("alice", 0); !ok {
				t.Fatalf("request %d of a burst of 3 a minute refused", i+1)
			}
		}
		for _, tt := range []struct {
			at   time.Duration
			ok   bool
			wait time.Duration
		}{
			{0, false, 20 * time.Second},
			{5 * time.Second, false, 15 * time.Second},
			{20 * time.Second, true, 0},
			{20 * time.Second, false, 20 * time.Second},
		} {
			wait, ok := take("alice", tt.at)
			if ok != tt.ok || (wait-tt.wait).Abs() > time.Millisecond {
				t.Errorf("at +%v: ok %v, wait %v; want %v, %v", tt.at, ok, wait, tt.ok, tt.wait)
			}
		}
		if _, ok := take("bob", 0); !ok {
			t.Error("bob's request was refused for alice's")
		}
		// An hour idle refilled the bucket to 3, not to 180.
		passed := 0
		for ; passed < 10; passed++ {
			if _, ok := take("alice", time.Hour); !ok {
				break
			}
		}
		if passed != 3 {
			t.Errorf("after an hour idle %d passed at once; want 3", passed)
		}
		// Taken at once, by as many servers, 10 a minute let 10 through.
		var wg sync.WaitGroup
		var mu sync.Mutex
		took := 0
		for range 20 {
			wg.Go(func() {
				_, ok, err := st.TakeRequest(ctx, "carol", 10, t0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if ok {
					took++
				}
			})
		}
		wg.Wait()
		if took != 10 {
			t.Errorf("20 requests at once under 10 a minute: %d passed, want 10", took)
		}
	})
	t.Run("Places", func(t *testing.T) {
		st := open(t)
		now := time.Now().Truncate(time.Millisecond)
		most := state.Most{Owner: 2, All: 3}
		hold := func(owner, id string, at time.Time) error {
			t.Helper()
			err := st.HoldPlace(ctx, owner, id, most, at)
			var full *state.FullError
			if err != nil && !errors.As(err, &full) {
				t.Fatalf("HoldPlace(%s, %s): %v", owner, id, err)
			}
			return err
		}
		wantFull := func(err error, all bool, held int) {
			t.Helper()
			var full *state.FullError
			if !errors.As(err, &full) || full.All != all || full.Held != held {
				t.Errorf("got %v; want a FullError with All %v, Held %d", err, all, held)
			}
		}
		if err := hold("alice", "cntr_1", now); err != nil {
			t.Fatal(err)
		}
		// Saved, it counts once, as a record and as a place.
		if err := st.SaveContainer(ctx, state.Container{ID: "cntr_1", Owner: "alice", CreatedAt: now, LastActive: now, Minutes: 20}); err != nil {
			t.Fatal(err)
		}
		if err := hold("alice", "cntr_2", now); err != nil {
			t.Fatalf("alice's second of 2: %v", err)
		}
		// Held again, a place counts once.
		if err := hold("alice", "cntr_2", now); err != nil {
			t.Fatalf("alice's second of 2, held again: %v", err)
		}
		wantFull(hold("alice", "cntr_3", now), false, 2)
		if err := hold("bob", "cntr_b1", now); err != nil {
			t.Fatalf("bob's first, the third of 3: %v", err)
		}
		wantFull(hold("bob", "cntr_b2", now), true, 3)
		if err := st.ReleasePlace(ctx, "cntr_2"); err != nil {
			t.Fatal(err)
		}
		if err := hold("alice", "cntr_3", now); err != nil {
			t.Fatalf("after a place was released: %v", err)
		}
		// Places of servers that died making them count no longer than
		// PlaceLifetime; saved containers count until deleted.
		later := now.Add(state.PlaceLifetime + time.Minute)
		if err := hold("bob", "cntr_b2", later); err != nil {
			t.Fatalf("after the places' lifetime: %v", err)
		}
		if err := hold("alice", "cntr_4", later); err != nil {
			t.Fatal(err)
		}
		wantFull(hold("alice", "cntr_5", later), false, 2)
		if err := st.DeleteContainer(ctx, "alice", "cntr_1"); err != nil {
			t.Fatal(err)
		}
		if err := hold("alice", "cntr_5", later); err != nil {
			t.Fatalf("after a container was deleted: %v", err)
		}
		// Held at once, by as many servers, only the free places are taken.
		var wg sync.WaitGroup
		var mu sync.Mutex
		held := 0
		for i := range 8 {
			wg.Go(func() {
				err := st.HoldPlace(ctx, "carol", fmt.Sprintf("cntr_c%d", i), state.Most{Owner: 3}, now)
				var full *state.FullError
				if err != nil && !errors.As(err, &full) {
					t.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					held++
				}
			})
		}
		wg.Wait()
		if held != 3 {
			t.Errorf("8 places held at once under a bound of 3: %d held, want 3", held)
		}
	})
	t.Run("Secret", func(t *testing.T) {
		st := open(t)
		a, err := st.Secret(ctx)
		if err != nil || len(a) < 32 {
			t.Fatalf("Secret = %x, %v; want 32 bytes or more", a, err)
		}
		if b, err := st.Secret(ctx); err != nil || !bytes.Equal(a, b) {
			t.Fatalf("a second Secret = %x, %v; want the first, %x", b, err, a)
		}
		if reopen != nil {
			if b, err := reopen(t, st).Secret(ctx); err != nil || !bytes.Equal(a, b) {
				t.Fatalf("after a restart: %x, %v; want %x", b, err, a)
			}
		}
		if b, err := open(t).Secret(ctx); err != nil || bytes.Equal(a, b) {
			t.Fatalf("another state's secret: %x, %v; want another", b, err)
		}
	})
}

// same compares containers as stored: times to the millisecond.
func same(a, b state.Container) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) || !a.LastActive.Equal(b.LastActive) {
		return false
	}
	a.CreatedAt, a.LastActive, b.CreatedAt, b.LastActive = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
