package conversation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/sandbox"
)

// Warm sandboxes.
//
// A conversation's first step waits for its sandbox and for Python to
// import the data libraries (Options.Prewarm): about 0.4 s on the local
// backend, most of it the imports, and more on a remote one. A server can
// pay that before anyone asks: it keeps a few sandboxes made, with their
// Python started and the imports under way or done, and a conversation it
// opens takes one. Each is made exactly as the conversation would make it
// itself (the same backend, the same sandbox and kernel options), so that
// what the code sees is the same, and each serves one conversation only:
// the one that takes it owns it, as if it had made it, and the pool makes
// another. A warm sandbox holds nobody's files; it is made before its
// owner is known, as any sandbox is made before the first upload.
//
// The pool keeps Deps.Warm sandboxes ready for each setup (backend,
// limits, network, exec mode) that conversations were opened with in the
// last warmForget, and for the setups a front-end names at start
// (Service.KeepWarm), for as long as the service lives: a server's
// containers come in a few setups (one per protocol, mostly), and a setup
// nobody asks for again costs nothing after a while.

// warmForget is how long the pool keeps sandboxes ready for a setup that
// conversations are no longer opened with.
const warmForget = time.Hour

// warmRetry is how long the pool waits before it tries again to make a
// sandbox that could not be made, doubling to warmRetryMax while it
// fails.
const (
	warmRetry    = time.Second
	warmRetryMax = time.Minute
)

// setup is what a conversation's sandbox and Python are made with: two
// conversations whose setups have the same key could use each other's
// sandbox.
type setup struct {
	backend sandbox.Backend
	sbx     sandbox.Options
	kernel  kernel.Options
}

func (s setup) key() string {
	return fmt.Sprintf("%T %p|%#v|%#v", s.backend, s.backend, s.sbx, s.kernel)
}

// setupOf is the setup of a conversation opened with cfg on backend.
func setupOf(backend sandbox.Backend, cfg *config.Config, valueApart bool) setup {
	return setup{backend: backend, sbx: sandboxOptions(cfg), kernel: kernelOptions(cfg, valueApart)}
}

// maxAge is how long a warm sandbox waits for a conversation before it is
// replaced: a tenth of its lifetime, which runs from when it was made, so
// that the conversation that takes it has at least nine tenths of it.
func (s setup) maxAge() time.Duration {
	if s.sbx.Timeout <= 0 {
		return 3 * time.Minute // the backend's lifetime, unknown here
	}
	return s.sbx.Timeout / 10
}

// warmSandbox is a sandbox made ahead, with its Python started.
type warmSandbox struct {
	sbx    sandbox.Sandbox
	runner kernel.Runner
	made   time.Time
	warmed <-chan struct{} // closed once its prewarm imports are over
}

// isWarm reports whether its imports are over.
func (w warmSandbox) isWarm() bool {
	select {
	case <-w.warmed:
		return true
	default:
		return false
	}
}

func (w warmSandbox) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.runner.Close()
	_ = w.sbx.Close(ctx)
}

// warmPools are the service's warm sandboxes, by setup.
type warmPools struct {
	size int
	log  *slog.Logger

	mu     sync.Mutex
	pools  map[string]*warmPool
	closed bool
}

func newWarmPools(size int, log *slog.Logger) *warmPools {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &warmPools{size: size, log: log, pools: map[string]*warmPool{}}
}

// take returns a warm sandbox made for st, if one is ready, and has the
// pool make sandboxes for st from now on (another, after this one).
func (w *warmPools) take(st setup) (warmSandbox, bool) {
	p := w.pool(st, false)
	if p == nil {
		return warmSandbox{}, false
	}
	return p.take()
}

// keep has the pool keep sandboxes ready for st for as long as it lives.
func (w *warmPools) keep(st setup) { w.pool(st, true) }

// pool returns st's pool, started now if there was none; nil when the
// service keeps no warm sandboxes or is closed.
func (w *warmPools) pool(st setup, pinned bool) *warmPool {
	if w == nil || w.size <= 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	key := st.key()
	p := w.pools[key]
	if p == nil {
		p = &warmPool{setup: st, size: w.size, log: w.log, asked: time.Now(),
			wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		w.pools[key] = p
		go p.run(func() { w.forget(key, p) })
	}
	p.mu.Lock()
	p.pinned = p.pinned || pinned
	p.asked = time.Now()
	p.mu.Unlock()
	return p
}

// forget drops p, which stopped because nobody asked for its setup.
func (w *warmPools) forget(key string, p *warmPool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pools[key] == p {
		delete(w.pools, key)
	}
}

// ready counts the warm sandboxes whose imports are over, of every setup.
// Those still importing may be taken too, but are not counted.
func (w *warmPools) ready() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, p := range w.pools {
		p.mu.Lock()
		for _, s := range p.ready {
			if s.isWarm() {
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// close removes every warm sandbox and makes no more.
func (w *warmPools) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	pools := w.pools
	w.pools = nil
	w.mu.Unlock()
	for _, p := range pools {
		close(p.stop)
	}
	for _, p := range pools {
		<-p.done
	}
}

// warmPool keeps size sandboxes of one setup ready.
type warmPool struct {
	setup setup
	size  int
	log   *slog.Logger

	mu     sync.Mutex
	ready  []warmSandbox
	asked  time.Time // when a conversation last took from it, or would have
	pinned bool      // kept however long nobody asks

	wake chan struct{} // a sandbox was taken
	stop chan struct{} // closed: remove them all
	done chan struct{} // closed when run has returned
}

func (p *warmPool) take() (warmSandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.poke()
	// The newest of those warm has the most of its lifetime left; one
	// still importing is better than none.
	best := -1
	for i, w := range p.ready {
		if time.Since(w.made) >= p.setup.maxAge() {
			continue
		}
		if best < 0 || w.isWarm() || !p.ready[best].isWarm() {
			best = i
		}
	}
	if best < 0 {
		return warmSandbox{}, false
	}
	w := p.ready[best]
	p.ready = append(p.ready[:best], p.ready[best+1:]...)
	return w, true
}

// stopped reports whether the pool is closed.
func (p *warmPool) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// poke wakes run to make what was taken again.
func (p *warmPool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run makes sandboxes, one at a time, until size are ready; replaces those
// that waited past their age; and stops, removing them, when the pool is
// closed or, unless pinned, when nobody asked for its setup in
// warmForget (then forget is called). A sandbox that cannot be made is
// tried again after warmRetry, then twice as long each time, up to
// warmRetryMax.
func (p *warmPool) run(forget func()) {
	defer close(p.done)
	defer p.drain()
	failures := 0
	var notBefore time.Time // of the next try, after a failure
	for {
		p.mu.Lock()
		now := time.Now()
		if !p.pinned && now.Sub(p.asked) > warmForget {
			p.mu.Unlock()
			forget()
			return
		}
		next := p.asked.Add(warmForget)
		var kept, old []warmSandbox
		for _, w := range p.ready {
			if end := w.made.Add(p.setup.maxAge()); now.Before(end) {
				kept = append(kept, w)
				next = earlier(next, end)
			} else {
				old = append(old, w)
			}
		}
		p.ready = kept
		short := len(p.ready) < p.size
		p.mu.Unlock()
		for _, w := range old {
			w.close()
		}
		if short && !now.Before(notBefore) {
			warmed, err := p.make()
			if p.stopped() {
				return
			}
			if err != nil {
				delay := min(warmRetry<<min(failures, 8), warmRetryMax)
				failures++
				notBefore = time.Now().Add(delay)
				p.log.Warn(fmt.Sprintf("could not make a warm sandbox (trying again in %s): %v", delay, err))
				continue
			}
			failures = 0
			// One at a time: the next one's imports would take the CPU
			// of this one's.
			t := time.NewTimer(p.setup.maxAge())
			select {
			case <-warmed:
			case <-t.C:
			case <-p.stop:
				t.Stop()
				return
			}
			t.Stop()
			continue
		}
		if short {
			next = earlier(next, notBefore)
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// make makes one sandbox with its Python started and adds it to ready,
// unless the pool is stopped meanwhile. It returns what is closed once
// the sandbox's imports are over.
func (p *warmPool) make() (<-chan struct{}, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kernel.DefaultReadyTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	sbx, err := p.setup.backend.Create(ctx, p.setup.sbx)
	if err != nil {
		return nil, err
	}
	w := warmSandbox{sbx: sbx, made: time.Now()}
	// The kernel lives as long as the sandbox: not as ctx, which bounds
	// only the wait for its start.
	k, err := kernel.Start(context.Background(), sbx, p.setup.kernel)
	if err != nil {
		_ = sbx.Close(ctx)
		return nil, err
	}
	w.runner, w.warmed = k, k.Warmed()
	if err := k.Ready(ctx); err != nil {
		w.close()
		return nil, err
	}
	p.mu.Lock()
	select {
	case <-p.stop:
		p.mu.Unlock()
		w.close()
	default:
		p.ready = append(p.ready, w)
		p.mu.Unlock()
	}
	return w.warmed, nil
}

// drain removes the sandboxes still ready.
func (p *warmPool) drain() {
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ready {
		wg.Go(w.close)
	}
	wg.Wait()
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
