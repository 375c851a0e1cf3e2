// Package pubsub hands values from a producer to the goroutines that watch
// it, with the one delivery rule every front-end shares: a producer says, per
// value, whether a slow subscriber may miss it (Publish) or must get it
// (Deliver), and the broker does the rest. It knows nothing of what the
// values are, so which of terp's events are lossy is decided once, next to the
// events (agent.Publish), and not again by each consumer.
//
// It follows charmbracelet/crush's internal/pubsub broker, with two changes
// terp needs: a must-deliver send waits as long as the context allows rather
// than a fixed timeout (a chat that falls behind must still see the step that
// ended a turn), and a subscription ends with its context or with Close,
// leaving no goroutine behind either way.
package pubsub

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is what Deliver returns once the broker is closed: nobody will
// read the value.
var ErrClosed = errors.New("pubsub: broker closed")

// Broker fans values out to its subscribers, each through a buffered channel
// of its own. The zero value is not usable; call New.
type Broker[T any] struct {
	buffer int

	// mu is held for reading while a value is sent and for writing while
	// subscribers come and go, so a channel is never closed under a send.
	mu     sync.RWMutex
	subs   map[*subscriber[T]]struct{}
	closed bool
}

type subscriber[T any] struct {
	c chan T
	// gone is the subscription's context's Done: a must-deliver send to a
	// subscriber that left gives up on it instead of waiting forever.
	gone <-chan struct{}
	// stop unregisters the callback that ends the subscription with its
	// context, so Close leaves nothing waiting on a context that lives on.
	stop func() bool
}

// New returns a broker whose subscribers each hold up to buffer values they
// have not read yet. The buffer is what lets a producer run ahead of a
// consumer that is drawing: lossy values are dropped only once it is full.
func New[T any](buffer int) *Broker[T] {
	return &Broker[T]{buffer: max(buffer, 0), subs: make(map[*subscriber[T]]struct{})}
}

// Subscribe returns a channel that receives every value published from now
// on, in order, minus the lossy ones that found it full. The channel is
// closed after the values already in it when the broker is closed or ctx
// ends, so a consumer can simply range over it. Subscribe before the producer
// starts, or miss what it sends first.
func (b *Broker[T]) Subscribe(ctx context.Context) <-chan T {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := make(chan T, b.buffer)
	if b.closed {
		close(c)
		return c
	}
	s := &subscriber[T]{c: c, gone: ctx.Done()}
	b.subs[s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() { b.unsubscribe(s) })
	return c
}

func (b *Broker[T]) unsubscribe(s *subscriber[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.c)
	}
}

// Publish is the lossy verb: it gives v to every subscriber with room for it
// and never waits, so a slow consumer costs the producer nothing but the
// values it missed. Nothing is sent once ctx has ended. It reports whether
// every subscriber got v.
func (b *Broker[T]) Publish(ctx context.Context, v T) bool {
	if ctx.Err() != nil {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	all := true
	for s := range b.subs {
		select {
		case s.c <- v:
		default:
			all = false
		}
	}
	return all
}

// Deliver is the must-deliver verb: it waits until every subscriber has v in
// its channel. It stops waiting for a subscriber whose own context ended
// (nobody reads that channel any more), and for all of them when ctx ends,
// returning ctx's error; it returns ErrClosed after Close. While it waits,
// subscribers can neither join nor leave, and a Publish from another
// producer can be held up behind one that tries: terp's producers are one
// loop each, which never publishes twice at once.
func (b *Broker[T]) Deliver(ctx context.Context, v T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	for s := range b.subs {
		select {
		case s.c <- v:
		case <-s.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close ends every subscription once the values in flight are sent: each
// channel is closed after what it holds, so consumers see the whole stream
// and then its end. Publishing after Close sends nothing. Close waits for a
// Deliver that is still waiting; it is meant to be called by the producer,
// after its last value.
func (b *Broker[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.stop()
		delete(b.subs, s)
		close(s.c)
	}
}
