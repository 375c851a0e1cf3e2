package state

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// bucket is a token bucket of one key's requests per minute, as the
// directory keeps it in memory.
type bucket struct {
	tokens float64
	at     time.Time
}

// take spends one request of a bucket that holds at most rpm, refilled at
// rpm a minute, at now; refused, it says how long until one is back.
func (b *bucket) take(now time.Time, rpm int) (time.Duration, bool) {
	rate := float64(rpm) / 60 // a second
	if b.at.IsZero() {
		b.tokens = float64(rpm)
	} else if now.After(b.at) {
		b.tokens = math.Min(float64(rpm), b.tokens+now.Sub(b.at).Seconds()*rate)
	}
	if now.After(b.at) {
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second)), false
}

// place is a container being made, held by HoldPlace.
type place struct {
	owner string
	at    time.Time
}

// TakeRequest counts in memory: the directory is one machine's, and a
// request count need not outlive its minute.
func (d *Dir) TakeRequest(_ context.Context, owner string, rpm int, now time.Time) (time.Duration, bool, error) {
	if rpm <= 0 {
		return 0, false, fmt.Errorf("a limit of %d requests a minute refuses everything", rpm)
	}
	d.rateMu.Lock()
	defer d.rateMu.Unlock()
	b := d.buckets[owner]
	if b == nil {
		b = &bucket{}
		d.buckets[owner] = b
	}
	wait, ok := b.take(now, rpm)
	return wait, ok, nil
}

// HoldPlace keeps the places in memory, under a lock of their own that
// it holds while it counts, so that two places cannot both be the last.
func (d *Dir) HoldPlace(_ context.Context, owner, id string, most Most, now time.Time) error {
	d.placesMu.Lock()
	defer d.placesMu.Unlock()
	mine, all := map[string]bool{}, map[string]bool{}
	for other, p := range d.places {
		if now.Sub(p.at) > PlaceLifetime {
			delete(d.places, other)
			continue
		}
		all[other] = true
		if p.owner == owner {
			mine[other] = true
		}
	}
	d.mu.Lock()
	for other, c := range d.containers {
		all[other] = true
		if c.Owner == owner {
			mine[other] = true
		}
	}
	d.mu.Unlock()
	delete(mine, id)
	delete(all, id)
	if most.Owner > 0 && len(mine) >= most.Owner {
		return &FullError{Held: len(mine)}
	}
	if most.All > 0 && len(all) >= most.All {
		return &FullError{All: true, Held: len(all)}
	}
	d.places[id] = place{owner: owner, at: now}
	return nil
}

func (d *Dir) ReleasePlace(_ context.Context, id string) error {
	d.placesMu.Lock()
	defer d.placesMu.Unlock()
	delete(d.places, id)
	return nil
}

// Secret is kept in the file secret, made on first use.
func (d *Dir) Secret(context.Context) ([]byte, error) {
	d.placesMu.Lock()
	defer d.placesMu.Unlock()
	if d.secret != nil {
		return d.secret, nil
	}
	path := filepath.Join(d.dir, "secret")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(b) != secretSize) {
		b = make([]byte, secretSize)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		err = writeAtomic(path, b)
	}
	if err != nil {
		return nil, fmt.Errorf("the servers' secret in %s: %w", d.dir, err)
	}
	d.secret = b
	return b, nil
}

// secretSize is the size of Secret's key: an HMAC-SHA256 key's.
const secretSize = 32
