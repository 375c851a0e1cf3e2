package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
)

// TestStreamSlowScreen plays a turn that streams far more deltas than the
// stream holds while the screen draws nothing, then reads it the way Update
// does: every step, call and answer arrives, in order, and the turn's end
// comes last, even though most of the deltas were dropped on the way.
func TestStreamSlowScreen(t *testing.T) {
	var events []agent.Event
	var want []agent.Event
	for step := 1; step <= 3; step++ {
		start := agent.StepStarted{Step: step, MaxSteps: 3}
		call := agent.ToolCall{Step: step, ID: fmt.Sprint(step), Name: "run_python", Code: "print(1)"}
		events = append(events, start)
		for i := range 1000 {
			events = append(events, agent.TextDelta{Text: fmt.Sprint(i)})
		}
		events = append(events, call)
		want = append(want, start, call)
	}
	events = append(events, agent.Answer{Text: "done"})
	want = append(want, agent.Answer{Text: "done"})

	conv := newScripted(play(Turn{Result: agent.Result{Answer: "done"}}, nil, events...))
	s := newStream(t.Context())
	ran := make(chan struct{})
	go func() {
		ask(t.Context(), conv, "go", s)()
		close(ran)
	}()

	var got []agent.Event
	deltas := 0
	for {
		msg := waitForEvent(s)()
		if done, ok := msg.(turnDoneMsg); ok {
			if done.turn.Result.Answer != "done" {
				t.Errorf("the turn ended with %+v, want its answer", done.turn)
			}
			break
		}
		e, ok := msg.(eventMsg)
		if !ok {
			t.Fatalf("got %#v before the turn's end", msg)
		}
		if _, ok := e.event.(agent.TextDelta); ok {
			deltas++
			continue
		}
		got = append(got, e.event)
		// A screen slower than the model: the turn runs ahead meanwhile.
		time.Sleep(time.Millisecond)
	}
	<-ran
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events other than deltas:\n got %v\nwant %v", got, want)
	}
	if deltas == 3000 {
		t.Log("no delta was dropped: the screen kept up after all")
	}
}

// TestStreamChatGone checks that a turn whose chat ended (ctrl+c, the window
// closed) runs to its end instead of waiting for a screen that will never
// read, and that the screen's last wait returns.
func TestStreamChatGone(t *testing.T) {
	var events []agent.Event
	for i := range 1000 {
		events = append(events, agent.StepStarted{Step: i + 1, MaxSteps: 1000})
	}
	conv := newScripted(play(Turn{}, nil, events...))
	life, end := context.WithCancel(t.Context())
	s := newStream(life)
	ran := make(chan struct{})
	go func() {
		ask(context.Background(), conv, "go", s)()
		close(ran)
	}()
	if msg, ok := waitForEvent(s)().(eventMsg); !ok {
		t.Fatalf("first message %#v, want an event", msg)
	}
	end()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the turn still waits for a chat that ended")
	}
	waited := make(chan struct{})
	go func() {
		for {
			msg := waitForEvent(s)()
			if _, ok := msg.(eventMsg); !ok {
				break
			}
		}
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("waitForEvent still waits after the chat ended")
	}
}
