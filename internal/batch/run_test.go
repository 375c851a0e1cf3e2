package batch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	cases := []Case{{ID: "a"}, {ID: "b", Model: "own"}}
	var got []string
	for _, r := range Plan(cases, nil, "def", 1) {
		got = append(got, fmt.Sprintf("%s %s %d %s", r.Case.ID, r.Model, r.N, r.Dir))
	}
	if want := "a def 1 a|b own 1 b"; strings.Join(got, "|") != want {
		t.Errorf("plan = %q, want %q", strings.Join(got, "|"), want)
	}
	got = nil
	for i, r := range Plan(cases, []string{"m1", "org/m2"}, "def", 2) {
		if r.Seq != i {
			t.Errorf("run %d has Seq %d", i, r.Seq)
		}
		got = append(got, fmt.Sprintf("%s %s %d %s", r.Case.ID, r.Model, r.N, r.Dir))
	}
	want := []string{
		"a m1 1 a/m1/run-1", "a org/m2 1 a/org_m2/run-1", "b m1 1 b/m1/run-1", "b org/m2 1 b/org_m2/run-1",
		"a m1 2 a/m1/run-2", "a org/m2 2 a/org_m2/run-2", "b m1 2 b/m1/run-2", "b org/m2 2 b/org_m2/run-2",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("plan =\n%s\nwant\n%s (--models replaces a case's own model; rounds of repeats)", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func testRuns(n int) []Run {
	cases := make([]Case, n)
	for i := range cases {
		cases[i] = Case{ID: fmt.Sprint("c", i), Question: "q"}
	}
	return Plan(cases, nil, "m", 1)
}

func TestRunnerRunsJobsAtOnce(t *testing.T) {
	const jobs = 4
	var inFlight, most atomic.Int32
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	r := Runner{Jobs: jobs, Exec: func(ctx context.Context, run Run) Outcome {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-release
		return Outcome{Answer: "ok", StopReason: "answered"}
	}}
	done := make(chan []Result)
	go func() { done <- r.Run(context.Background(), testRuns(10)) }()
	for range jobs {
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d runs started at once, want %d", inFlight.Load(), jobs)
		}
	}
	close(release)
	results := <-done
	if len(results) != 10 || most.Load() != jobs {
		t.Errorf("%d results, at most %d at once; want 10 and %d", len(results), most.Load(), jobs)
	}
	for i, res := range results {
		if res.ID != fmt.Sprint("c", i) || res.Status != Passed {
			t.Errorf("result %d = %s %s, want c%d passed, in plan order", i, res.ID, res.Status, i)
		}
	}
}

func TestRunnerSurvivesACrash(t *testing.T) {
	var mu sync.Mutex
	var order []string
	r := Runner{
		Jobs: 2,
		Exec: func(ctx context.Context, run Run) Outcome {
			if run.Case.ID == "c1" {
				panic("boom")
			}
			return Outcome{Answer: "ok", StopReason: "answered"}
		},
		Done: func(res Result) {
			mu.Lock()
			order = append(order, res.ID)
			mu.Unlock()
		},
	}
	results := r.Run(context.Background(), testRuns(3))
	if len(results) != 3 || len(order) != 3 {
		t.Fatalf("got %d results and %d Done calls, want 3", len(results), len(order))
	}
	if results[1].Status != Errored || !strings.Contains(results[1].Reasons[0], "terp crashed on this case: boom") {
		t.Errorf("the crashing case = %+v", results[1])
	}
	if results[0].Status != Passed || results[2].Status != Passed {
		t.Errorf("the other cases did not pass: %+v", results)
	}
}

func TestRunnerStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	r := Runner{Jobs: 2, Exec: func(ctx context.Context, run Run) Outcome {
		started.Add(1)
		if run.Case.ID == "c0" {
			return Outcome{Answer: "quick", StopReason: "answered"}
		}
		cancel()
		<-ctx.Done()
		return Outcome{StopReason: "cancelled", Err: ctx.Err()}
	}}
	results := r.Run(ctx, testRuns(20))
	if len(results) != 1 || results[0].ID != "c0" {
		t.Errorf("results = %+v, want only the run that finished", results)
	}
	if n := started.Load(); n > 3 {
		t.Errorf("%d runs started after the cancel, want no new ones", n)
	}
}
