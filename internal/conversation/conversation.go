package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
)

// Conversation is one open conversation: its stored record, its sandbox, the
// runner that runs code there (the kernel starts with the sandbox, so its
// imports happen while the model thinks about the first step) and the agent
// that holds the history. The record is saved after every completed step;
// Close pauses the sandbox, so that a later process can resume the
// conversation with the same /work. A save that fails is retried at every
// later one (see save), never the end of a turn.
//
// Its methods are safe for concurrent use; turns run one at a time (see the
// package doc for what waits for a turn and what is refused).
type Conversation struct {
	ID string

	svc       *Service
	cfg       *config.Config // this conversation's own
	lock      store.Lock
	backend   sandbox.Backend
	keepFiles bool
	// valueApart keeps a cell's trailing value out of its output, as its
	// record's settings say (store.Settings.ValueApart).
	valueApart bool

	sbx    sandbox.Sandbox
	runner kernel.Runner
	agent  *agent.Agent

	// turn is the turn lock, a semaphore of one taken through lockTurn: a
	// channel, not a sync.Mutex, so that a caller waiting for it can give
	// up when its context ends. running counts the turns and file jobs in
	// flight, for Close to wait on.
	turn    chan struct{}
	running sync.WaitGroup
	// earlier and past describe what was asked before it was opened.
	earlier int
	past    []Exchange

	// mu guards the sandbox's state between turns against the idle timer.
	mu   sync.Mutex
	busy int // turns and file jobs running
	// paused is set while the sandbox is paused, until the next turn
	// wakes it; written under mu, read without it by Paused.
	paused     atomic.Bool
	closed     bool        // Close has run
	closing    bool        // Close has begun: no new turn or file call
	idle       *time.Timer // pauses the sandbox after idle_pause
	awakeSince time.Time   // when the sandbox was created or last resumed

	// recMu guards the record and its saves, which steps, uploads,
	// downloads and pauses all make.
	recMu sync.Mutex
	rec   *store.Conversation
	// unsaved is why the last save failed; nil when the stored record is
	// the conversation as it is.
	unsaved error
	// discarded is set when Close found nothing worth keeping.
	discarded bool

	// warnMu guards what the user is still to hear, and the running turn's
	// send function with how much of it the turn has heard. No lock of the
	// conversation but the turn lock is held while send runs (see tell): it
	// may be a network write to a slow client, and must not hold up Info,
	// a save or the idle pause meanwhile.
	warnMu  sync.Mutex
	pending []string
	told    int // how many of pending send has heard
	send    func(agent.Event)
}

// ErrBusy is returned by a turn or a run (Turn, Ask, Continue, Run) while
// another of the same conversation runs.
var ErrBusy = errors.New("the conversation is busy with another question; wait for it to finish or cancel it")

// onBusy is what lockTurn does when another holds the turn lock.
type onBusy int

const (
	// refuse returns ErrBusy at once: for turns and runs, which a server
	// must answer 409 rather than queue behind the one that runs.
	refuse onBusy = iota
	// wait waits for the lock as long as the context allows: for the
	// rest, which are quick once the turn is over.
	wait
)

// lockTurn takes the turn lock, which orders everything that reads or
// changes the agent (its history, settings, sandbox and runner), and
// returns the function that lets it go. When another holds it, a turn is
// refused and anything else waits, as busy says; a wait that ctx ends
// returns ctx's error without the lock. A free lock is taken whatever ctx
// says: the caller finds out about its context soon enough.
func (c *Conversation) lockTurn(ctx context.Context, busy onBusy) (unlock func(), err error) {
	unlock = func() { <-c.turn }
	select {
	case c.turn <- struct{}{}:
		return unlock, nil
	default:
	}
	if busy == refuse {
		return nil, ErrBusy
	}
	select {
	case c.turn <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// warn tells the user something that did not stop the conversation: at once
// as an agent.Notice when a turn is running, and in the next Turn.Warnings
// or Warnings either way. Its caller holds none of mu, recMu and warnMu; one
// that does calls warnLater.
func (c *Conversation) warn(text string) {
	c.warnLater(text)
	c.tell()
}

// warnLater is warn for a caller that holds mu or recMu: the warning is
// queued, and the running turn hears it at the next tell, which a caller
// makes once it has let go of the lock (begin, checkpoint, the first run),
// and at the latest when the turn ends.
func (c *Conversation) warnLater(text string) {
	c.warnMu.Lock()
	c.pending = append(c.pending, text)
	c.warnMu.Unlock()
}

// tell sends the running turn, as agent.Notice events, the warnings it has
// not heard. Its caller holds none of mu, recMu and warnMu, so that a send
// held up by a slow client holds up nothing else.
func (c *Conversation) tell() {
	c.warnMu.Lock()
	send, news := c.send, []string(nil)
	if send != nil {
		news = slices.Clone(c.pending[c.told:])
		c.told = len(c.pending)
	}
	c.warnMu.Unlock()
	for _, w := range news {
		send(agent.Notice{Text: w})
	}
}

// startTelling makes send the running turn's: it hears at once what
// happened since the last turn, and the warnings that come while it runs.
func (c *Conversation) startTelling(send func(agent.Event)) {
	c.warnMu.Lock()
	c.send, c.told = send, 0
	c.warnMu.Unlock()
	c.tell()
}

// stopTelling ends the running turn's hearing: it is sent what it has not
// heard yet, so that it has heard all it returns, the warnings since it
// began, which are forgotten. A second call returns nothing.
func (c *Conversation) stopTelling() []string {
	c.warnMu.Lock()
	send := c.send
	if send == nil {
		c.warnMu.Unlock()
		return nil
	}
	news, out := slices.Clone(c.pending[c.told:]), c.pending
	c.send, c.told, c.pending = nil, 0, nil
	c.warnMu.Unlock()
	for _, w := range news {
		send(agent.Notice{Text: w})
	}
	return out
}

// Warnings returns what the user should hear that no turn has reported yet
// (an upload's save that failed, an idle pause that did not happen, the
// settings a resume kept), and forgets it. A front-end calls it after
// anything but a turn, whose Turn carries its own.
func (c *Conversation) Warnings() []string {
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	out := c.pending
	c.pending, c.told = nil, 0
	return out
}

// wake brings a paused conversation back: its sandbox resumed, or replaced
// with the original uploads when it expired or vanished, and a fresh runner;
// the model is told what it lost. It serves resuming a stored conversation,
// and a conversation whose sandbox was paused while the user was away.
func (c *Conversation) wake(ctx context.Context) error {
	var note string
	// Asked before anything is saved, which records the mode used from now.
	lostVariables := c.ranInKernel()
	resumed := false
	if id := c.rec.Sandbox.SessionID; id != "" && c.rec.Sandbox.Backend == c.cfg.Sandbox {
		sbx, err := c.backend.Resume(ctx, sandbox.SessionID(id))
		switch {
		case err == nil:
			c.sbx, resumed = sbx, true
		case !errors.Is(err, sandbox.ErrExpired):
			return fmt.Errorf("resume the sandbox of conversation %s: %w", c.ID, err)
		}
	}
	if !resumed {
		if err := c.create(ctx); err != nil {
			return err
		}
		if err := c.uploadInputs(ctx); err != nil {
			return err
		}
		note = c.replacedNote()
	} else if lostVariables {
		// Every backend keeps files, not memory, across a pause, and the
		// runner below starts afresh.
		note = kernel.LostSession("Python was restarted since the last question")
		if kernel.Mode(c.cfg.ExecMode) == kernel.ModeScript {
			note = kernel.LostSession("Code now runs as a new Python script each time")
		}
	}
	if err := c.startRunner(ctx); err != nil {
		return err
	}
	var err error
	if c.agent == nil {
		c.agent = c.newAgent()
		err = c.agent.Restore(ctx, c.rec.Messages, c.rec.Usage, c.rec.Steps)
		c.earlier, c.past = c.rec.Turns, pastExchanges(c.rec.Messages, maxPast)
	} else {
		err = c.agent.Rebind(ctx, c.sbx, c.runner)
	}
	if err != nil {
		return err
	}
	if note != "" {
		c.agent.Note(note)
	}
	c.paused.Store(false)
	c.awakeSince = time.Now()
	c.save()
	return nil
}

// ranInKernel reports whether code may have left variables in a kernel of
// this conversation: code ran (or began to) while it was in kernel mode. A
// record written before CodeRan existed shows it by a tool result.
func (c *Conversation) ranInKernel() bool {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	if kernel.Mode(c.rec.Settings.ExecMode) == kernel.ModeScript {
		return false
	}
	return c.rec.CodeRan || slices.ContainsFunc(c.rec.Messages, func(m llm.Message) bool { return m.Role == llm.RoleTool })
}

// suspend pauses the sandbox while the conversation stays open, as when its
// user has been away for idle_pause: a paused sandbox costs only disk. The
// next turn wakes it. The caller holds mu.
func (c *Conversation) suspend(ctx context.Context) error {
	if c.paused.Load() || c.sbx == nil {
		return nil
	}
	_ = c.runner.Close()
	id, err := c.sbx.Pause(ctx)
	if err != nil {
		return fmt.Errorf("pause the sandbox: %w", err)
	}
	c.paused.Store(true)
	c.update(func(r *store.Conversation) { r.Sandbox.SessionID = string(id) })
	return nil
}

// Paused reports whether the sandbox is paused: idle past idle_pause, it
// costs only disk until the next turn wakes it. It never waits, not even
// for a sandbox being paused or woken, so that a server's metrics can ask
// it of every conversation at each scrape.
func (c *Conversation) Paused() bool { return c.paused.Load() }

// begin readies the sandbox for work and holds off the idle pause until end.
// A sandbox paused while the user was away is woken, and one that has lived
// its sandbox_timeout is renewed (paused and resumed, which restarts its
// lifetime). When begin fails there is no end to come, so it lets the pause
// be armed again. What waking or renewing had to warn of is told once mu
// is let go.
func (c *Conversation) begin(ctx context.Context) (err error) {
	defer c.tell()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.closing {
		return errors.New("the conversation is closed")
	}
	// Added to under mu, before closing is set: Close's Wait comes after.
	c.running.Add(1)
	c.busy++
	defer func() {
		if err != nil {
			c.busy--
			c.running.Done()
		}
	}()
	if c.idle != nil {
		c.idle.Stop()
	}
	if !c.paused.Load() && c.cfg.SandboxTimeout > 0 && time.Since(c.awakeSince) > c.cfg.SandboxTimeout {
		if err := c.suspend(ctx); err != nil {
			return err
		}
	}
	if c.paused.Load() {
		return c.wake(ctx)
	}
	return nil
}

// end arms the idle pause once nothing runs.
func (c *Conversation) end() {
	defer c.running.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy--
	if c.busy > 0 || c.cfg.IdlePause <= 0 || c.closed {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(c.cfg.IdlePause, c.idleTimeout)
		return
	}
	c.idle.Reset(c.cfg.IdlePause)
}

// idleTimeout pauses the sandbox of a conversation left idle. A turn may
// be about to begin, its send function set and waiting for mu: what the
// pause warns of is told to it once mu is let go.
func (c *Conversation) idleTimeout() {
	defer c.tell()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy > 0 || c.closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.suspend(ctx); err != nil {
		c.warnLater("while you were away, " + err.Error() + "; it keeps running until the conversation ends")
	}
}

// create makes a new sandbox for the conversation and records its id at
// once, so a process killed before its first step still leaves a
// conversation the next one can resume.
func (c *Conversation) create(ctx context.Context) error {
	sbx, err := c.backend.Create(ctx, sandboxOptions(c.cfg))
	if err != nil {
		return fmt.Errorf("create the %s sandbox: %w", c.cfg.Sandbox, err)
	}
	c.use(sbx)
	return nil
}

// use makes sbx the conversation's sandbox and records its id.
func (c *Conversation) use(sbx sandbox.Sandbox) {
	c.sbx = sbx
	c.update(func(r *store.Conversation) {
		r.Sandbox = store.SandboxRef{Backend: c.cfg.Sandbox, SessionID: string(sbx.ID())}
	})
}

// sandboxOptions are what a conversation with cfg makes its sandbox with.
func sandboxOptions(cfg *config.Config) sandbox.Options {
	return sandbox.Options{
		Timeout: cfg.SandboxTimeout,
		Limits: sandbox.Limits{
			MemoryBytes:   cfg.MemoryLimit,
			Processes:     cfg.ProcessLimit,
			FileSizeBytes: cfg.FileSizeLimit,
			WorkBytes:     cfg.MaxWorkSize,
		},
		Network: cfg.NetworkPolicy(),
	}
}

// startRunner starts the runner for the conversation's sandbox, as exec_mode
// says, wrapped so that the first run is recorded before it starts.
func (c *Conversation) startRunner(ctx context.Context) error {
	r, err := newRunner(ctx, c.sbx, c.cfg, c.valueApart)
	if err != nil {
		return err
	}
	c.useRunner(r)
	return nil
}

// useRunner makes r what runs the conversation's code.
func (c *Conversation) useRunner(r kernel.Runner) {
	c.runner = recordingRunner{Runner: r, c: c}
}

// recordingRunner saves, before the conversation's code first runs, that it
// ran (store.Conversation.CodeRan): no step may be saved before the process
// dies, yet from then on there are variables to lose and files to keep.
type recordingRunner struct {
	kernel.Runner
	c *Conversation
}

func (r recordingRunner) Run(ctx context.Context, code string, timeout time.Duration) (kernel.Result, error) {
	c := r.c
	c.recMu.Lock()
	if !c.rec.CodeRan {
		c.rec.CodeRan = true
		c.saveLocked()
	}
	c.recMu.Unlock()
	c.tell()
	return r.Runner.Run(ctx, code, timeout)
}

// newAgent makes the conversation's agent, which saves after every step. A
// service without a model (an MCP server, whose client writes the code)
// makes agents that only run code (Conversation.Run).
func (c *Conversation) newAgent() *agent.Agent {
	var model agent.Completer
	if c.svc.newModel != nil {
		model = c.svc.newModel(c.cfg)
	}
	ac := AgentConfig(c.cfg)
	ac.Checkpoint = c.checkpoint
	return agent.New(model, c.sbx, c.runner, ac)
}

// checkpoint saves the conversation after a completed step. It never fails:
// a save that fails is a warning (see save), for the turn is worth more than
// its record, and the next checkpoint saves it all.
func (c *Conversation) checkpoint(cp agent.Checkpoint) error {
	c.update(func(r *store.Conversation) {
		r.Messages, r.Usage, r.Steps = cp.Messages, cp.Usage, cp.Steps
		if cp.TurnDone {
			r.Turns++
		}
		if r.Title == "" {
			r.SetTitle(firstQuestion(cp.Messages))
		}
	})
	c.tell()
	return nil
}

// update changes the record with change (when there is one) and saves it.
// Its caller may hold mu, so a save that fails is not told from here: the
// caller tells it once it holds no lock, or leaves it to whoever does next.
func (c *Conversation) update(change func(*store.Conversation)) {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	if change != nil {
		change(c.rec)
	}
	c.saveLocked()
}

// save writes the record as it is.
func (c *Conversation) save() { c.update(nil) }

// saveLocked writes the whole record with the settings the conversation now
// runs with; the caller holds recMu, so what it warns of waits for a tell
// (see warnLater). A save that fails (a full disk, a
// store made read-only) ends nothing and damages nothing: store.Save
// replaces the old record atomically, so it stays as it was; the
// conversation goes on in memory and the user is told once; every later
// save (the next step, a pause, Close) writes everything again, so the first
// that succeeds stores it all, the sandbox's id included.
func (c *Conversation) saveLocked() {
	c.rec.Settings.Model = c.cfg.Model
	c.rec.Settings.BaseURL = c.cfg.BaseURL
	c.rec.Settings.ExecMode = c.cfg.ExecMode
	st := c.svc.store
	err := st.Save(c.rec)
	switch {
	case err != nil && c.unsaved == nil:
		c.warnLater(fmt.Sprintf("%v; the conversation goes on and the record stored before is intact: "+
			"free space in %s (or make it writable) and terp saves everything after the next step or on exit", err, st.Where()))
	case err == nil && c.unsaved != nil:
		c.warnLater(fmt.Sprintf("conversation %s is saved again", c.ID))
	}
	c.unsaved = err
}

// replacedNote tells the model that its sandbox is new.
func (c *Conversation) replacedNote() string {
	note := "This conversation's sandbox had expired, so a new one was created: files saved by " +
		"earlier steps and all variables are gone."
	if len(c.rec.Inputs) > 0 {
		names := make([]string, len(c.rec.Inputs))
		for i, in := range c.rec.Inputs {
			names[i] = sandbox.WorkDir + "/" + in.Name
		}
		note += " The uploaded files were uploaded again: " + strings.Join(names, ", ") + "."
	}
	return note
}

// Close stops the runner, pauses the sandbox so that a later process can
// resume the conversation, saves the record and lets the conversation go. It
// waits a while for a cancelled turn to let go of the sandbox first. The
// caller's context may be cancelled by now (Ctrl+C); this must still happen.
// It returns what the user should still hear, the problems of closing
// included.
func (c *Conversation) Close(ctx context.Context) []string {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.Warnings()
	}
	c.closed = true
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.runner != nil {
		_ = c.runner.Close()
	}
	if c.sbx != nil && c.empty() {
		// Nothing was said, run or uploaded (a chat left at once, a
		// question the server refused, a kernel that would not start):
		// nothing is worth keeping.
		if err := c.sbx.Close(ctx); err != nil {
			c.warnLater("removing the sandbox: " + err.Error())
		}
		_ = c.svc.store.Remove(c.ID)
		c.discarded = true
		c.release()
		return c.Warnings()
	}
	if c.sbx != nil && !c.paused.Load() {
		id, err := c.sbx.Pause(ctx)
		if err != nil {
			c.warnLater("pausing the sandbox: " + err.Error())
		}
		c.update(func(r *store.Conversation) {
			if err == nil {
				r.Sandbox.SessionID = string(id)
			}
		})
	} else if c.unsaved != nil {
		c.save()
	}
	if c.unsaved != nil {
		c.warnLater(fmt.Sprintf("conversation %s could not be saved on exit (%v): what is stored of it is "+
			"as of its last save that worked, and its sandbox is kept; free space in %s before going on with it (terp ask --resume %s)",
			c.ID, c.unsaved, c.svc.store.Where(), c.ID))
	}
	c.release()
	return c.Warnings()
}

// Kept reports whether the conversation is stored, to be resumed: after
// Close, unless it held nothing of the user's.
func (c *Conversation) Kept() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.discarded
}

// empty reports whether the conversation holds nothing of the user's: no
// message, no code that ran, no upload, not even one whose copy was kept
// before the sandbox refused it. Only such a conversation is ever discarded
// without the user asking; every error path keeps the others, paused, to be
// resumed.
func (c *Conversation) empty() bool {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	if len(c.rec.Messages) > 0 || c.rec.CodeRan || len(c.rec.Inputs) > 0 {
		return false
	}
	kept, err := c.svc.store.HasInputs(c.ID)
	return err == nil && !kept
}

// release lets another process open the conversation.
func (c *Conversation) release() {
	if c.lock != nil {
		_ = c.lock.Unlock()
		c.lock = nil
	}
}
