package sandbox

import (
	"context"
	"fmt"
	"time"
)

// State is where a backend's sandbox object is in its life. Backends keep
// one under their own lock.
type State int

// The states: a sandbox runs commands until it is paused or closed; a paused
// one is resumed as a new object by Backend.Resume.
const (
	Running State = iota
	Paused
	Closed
)

// Usable returns why a sandbox in this state, with the given deadline (its
// lifetime, Options.Timeout, counted from creation or resume), may not start
// a new command, or nil. id names the sandbox in the message.
func (st State) Usable(id SessionID, deadline time.Time, lifetime time.Duration) error {
	switch st {
	case Paused:
		return fmt.Errorf("sandbox %s is paused", id)
	case Closed:
		return fmt.Errorf("sandbox %s is closed", id)
	}
	if time.Now().After(deadline) {
		return fmt.Errorf("sandbox %s: lifetime of %s is over: %w", id, lifetime, ErrExpired)
	}
	return nil
}

// Watch calls stop once ctx ends (timedOut false) or timeout passes (true),
// unless done is closed first. A zero timeout means only ctx counts. It is
// how a backend kills a command at its ExecOptions.Timeout or when its
// caller gives up.
func Watch(ctx context.Context, timeout time.Duration, done <-chan struct{}, stop func(timedOut bool)) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		timer = t.C
		go func() { <-done; t.Stop() }()
	}
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
			stop(false)
		case <-timer:
			stop(true)
		}
	}()
}
