package pubsub

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

// step is one thing a scripted producer does: publish lossily, deliver, or
// (gate) let the subscriber start reading.
type step struct {
	v    string
	must bool
	gate bool
}

func lossy(v string) step { return step{v: v} }
func must(v string) step  { return step{v: v, must: true} }

var gate = step{gate: true}

// TestSlowSubscriber plays a producer against a subscriber that reads
// nothing until the gate opens: lossy values that find its buffer full are
// lost, delivered ones never are, and what arrives keeps its order.
func TestSlowSubscriber(t *testing.T) {
	tests := []struct {
		name   string
		buffer int
		steps  []step
		// get must all arrive, in this order; lose must not arrive.
		get, lose []string
	}{
		{
			name:   "room for everything",
			buffer: 8,
			steps:  []step{lossy("a"), must("B"), lossy("c"), gate, must("D")},
			get:    []string{"a", "B", "c", "D"},
		},
		{
			name:   "full buffer drops deltas",
			buffer: 2,
			steps:  []step{lossy("a"), lossy("b"), lossy("c"), lossy("d"), gate, must("E")},
			get:    []string{"a", "b", "E"},
			lose:   []string{"c", "d"},
		},
		{
			name:   "must-deliver waits for a full subscriber",
			buffer: 1,
			steps:  []step{must("A"), lossy("b"), gate, must("C"), must("D"), must("E")},
			get:    []string{"A", "C", "D", "E"},
			lose:   []string{"b"},
		},
		{
			name:   "unbuffered subscriber gets only what it waits for",
			buffer: 0,
			steps:  []step{lossy("a"), gate, must("B"), must("C")},
			get:    []string{"B", "C"},
			lose:   []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[string](tt.buffer)
			sub := b.Subscribe(t.Context())
			open := make(chan struct{})
			got := make(chan []string)
			go func() {
				<-open
				var vs []string
				for v := range sub {
					vs = append(vs, v)
				}
				got <- vs
			}()
			var sent []string
			for _, s := range tt.steps {
				switch {
				case s.gate:
					close(open)
				case s.must:
					if err := b.Deliver(t.Context(), s.v); err != nil {
						t.Fatalf("Deliver(%q) = %v", s.v, err)
					}
					sent = append(sent, s.v)
				default:
					b.Publish(t.Context(), s.v)
					sent = append(sent, s.v)
				}
			}
			b.Close()
			vs := <-got
			if !subsequence(tt.get, vs) {
				t.Errorf("got %q, want %q among them in order", vs, tt.get)
			}
			if !subsequence(vs, sent) {
				t.Errorf("got %q, out of the order sent (%q)", vs, sent)
			}
			for _, v := range tt.lose {
				if slices.Contains(vs, v) {
					t.Errorf("got %q, which holds %q: it was sent lossily to a full subscriber", vs, v)
				}
			}
		})
	}
}

// subsequence reports whether sub's elements appear in all, in order.
func subsequence(sub, all []string) bool {
	i := 0
	for _, v := range all {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}

// TestDeliverGivesUp checks that a must-deliver send to a subscriber that
// never reads returns as soon as the context that bounds it ends: the
// publisher's, or the subscription's own.
func TestDeliverGivesUp(t *testing.T) {
	tests := []struct {
		name string
		// end ends one of the two contexts, given both cancel functions.
		end     func(pub, sub context.CancelFunc)
		wantErr error
	}{
		{name: "publisher's context cancelled", end: func(pub, _ context.CancelFunc) { pub() }, wantErr: context.Canceled},
		{name: "subscriber's context cancelled", end: func(_, sub context.CancelFunc) { sub() }, wantErr: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[int](0)
			subCtx, cancelSub := context.WithCancel(t.Context())
			defer cancelSub()
			pubCtx, cancelPub := context.WithCancel(t.Context())
			defer cancelPub()
			sub := b.Subscribe(subCtx)
			errc := make(chan error, 1)
			go func() { errc <- b.Deliver(pubCtx, 1) }()
			select {
			case err := <-errc:
				t.Fatalf("Deliver returned %v before anyone read or any context ended", err)
			case <-time.After(20 * time.Millisecond):
			}
			tt.end(cancelPub, cancelSub)
			select {
			case err := <-errc:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Deliver = %v, want %v", err, tt.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Deliver still blocked after its context ended")
			}
			b.Close()
			for v := range sub {
				t.Errorf("the subscriber got %d, which was never delivered", v)
			}
		})
	}
}

// TestEndedContextSendsNothing checks that both verbs honour a context that
// ended before the call, and a broker that was closed.
func TestEndedContextSendsNothing(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		close bool
		err   error
	}{
		{name: "context ended", ctx: done, err: context.Canceled},
		{name: "broker closed", ctx: context.Background(), close: true, err: ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New[int](4)
			sub := b.Subscribe(context.Background())
			if tt.close {
				b.Close()
			}
			if b.Publish(tt.ctx, 1) {
				t.Error("Publish reported a value delivered")
			}
			if err := b.Deliver(tt.ctx, 2); !errors.Is(err, tt.err) {
				t.Errorf("Deliver = %v, want %v", err, tt.err)
			}
			b.Close()
			for v := range sub {
				t.Errorf("the subscriber got %d", v)
			}
		})
	}
}

// TestSubscribeAfterClose checks that a late subscriber's range loop ends
// at once instead of waiting for values that will never come.
func TestSubscribeAfterClose(t *testing.T) {
	b := New[int](1)
	b.Close()
	if _, ok := <-b.Subscribe(context.Background()); ok {
		t.Error("a subscription to a closed broker received a value")
	}
}

// TestNoGoroutineLeft counts goroutines around a broker's life: subscribers
// that leave through their context, that never leave (a background
// context), and one blocked in Deliver that the context frees must all leave
// nothing running once the broker is closed.
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 20 {
		b := New[int](1)
		ctx, cancel := context.WithCancel(context.Background())
		left := b.Subscribe(ctx)
		_ = b.Subscribe(context.Background())
		stuck := b.Subscribe(context.Background())
		b.Publish(context.Background(), 1)
		pub, stop := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- b.Deliver(pub, 2) }()
		cancel()
		stop()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Deliver = %v, want it cancelled", err)
		}
		for range left {
		}
		b.Close()
		for range stuck {
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
