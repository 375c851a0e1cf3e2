package agent_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/pubsub"
)

// TestPublishRule checks the one rule for every event a turn sends to a
// consumer that is not reading: deltas are dropped at once, every other
// event waits until the consumer takes it.
func TestPublishRule(t *testing.T) {
	tests := []struct {
		event agent.Event
		lossy bool
	}{
		{agent.TextDelta{Text: "4"}, true},
		{agent.ReasoningDelta{Text: "hmm"}, true},
		{agent.StepStarted{Step: 1, MaxSteps: 8}, false},
		{agent.ToolCall{Step: 1, ID: "c1", Name: "run_python", Code: "print(1)"}, false},
		{agent.OutputDelta{Step: 1, ID: "c1", Stream: "stdout", Text: "1\n"}, true},
		{agent.ToolOutput{Step: 1, ID: "c1", Stdout: "1\n"}, false},
		{agent.FileSaved{Path: "chart.png", Bytes: 10}, false},
		{agent.UsageUpdated{Usage: llm.Usage{TotalTokens: 3}}, false},
		{agent.Answer{Text: "4"}, false},
		{agent.Failed{Err: errors.New("boom")}, false},
		{agent.Notice{Text: "shortened"}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T", tt.event), func(t *testing.T) {
			b := pubsub.New[agent.Event](0)
			sub := b.Subscribe(t.Context())
			returned := make(chan struct{})
			go func() {
				agent.Publish(t.Context(), b, tt.event)
				close(returned)
			}()
			if tt.lossy {
				select {
				case <-returned:
				case <-time.After(5 * time.Second):
					t.Fatal("a delta waited for a consumer that does not read")
				}
				b.Close()
				for e := range sub {
					t.Errorf("the consumer got %#v, dropped because it was not reading", e)
				}
				return
			}
			select {
			case <-returned:
				t.Fatal("the event was dropped: Publish returned before anyone read it")
			case <-time.After(20 * time.Millisecond):
			}
			if got := <-sub; !reflect.DeepEqual(got, tt.event) {
				t.Errorf("the consumer got %#v, want %#v", got, tt.event)
			}
			<-returned
			b.Close()
		})
	}
}

// TestSenderGivesUpWithItsContext checks that a turn publishing to a
// consumer that went away (the chat closed) is not held up by it.
func TestSenderGivesUpWithItsContext(t *testing.T) {
	b := pubsub.New[agent.Event](0)
	_ = b.Subscribe(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	send := agent.Sender(ctx, b)
	returned := make(chan struct{})
	go func() {
		send(agent.Answer{Text: "4"})
		close(returned)
	}()
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("send still waits after its context ended")
	}
	b.Close()
}
