package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/sanitize"
	"github.com/terpdev/terp/internal/store"
	"github.com/terpdev/terp/internal/tui"
)

// session is one conversation as a command runs it: its stored record, its
// sandbox, the runner that runs code there (the kernel starts with the
// sandbox, so its imports happen while the model thinks about the first
// step) and the agent that holds the history. The record is saved after
// every completed step; closing the session pauses the sandbox, so a later
// command can resume the conversation with the same /work. A save that fails
// is retried at every later one (see save), never the end of a turn.
type session struct {
	ID      string
	Sandbox sandbox.Sandbox
	Runner  kernel.Runner
	Agent   *agent.Agent
	Conv    *store.Conversation

	f       *Factory
	cfg     *config.Config
	store   *store.Store
	lock    *store.Lock
	backend sandbox.Backend

	// mu guards the sandbox's state between turns against the idle timer.
	mu         sync.Mutex
	busy       int         // turns and file jobs running
	paused     bool        // the sandbox is paused; the next turn wakes it
	closed     bool        // Close has run
	idle       *time.Timer // pauses the sandbox after idle_pause
	awakeSince time.Time   // when the sandbox was created or last resumed

	// unsaved is why the last save failed; nil when the stored record is
	// the conversation as it is.
	unsaved error
}

// openSession starts a new conversation for the command origin (ask, chat
// or batch).
func openSession(ctx context.Context, f *Factory, cfg *config.Config, origin string) (*session, error) {
	st, err := f.Store()
	if err != nil {
		return nil, err
	}
	backend, err := f.NewBackend(cfg)
	if err != nil {
		return nil, err
	}
	id := store.NewID()
	lock, err := st.Lock(id)
	if err != nil {
		return nil, err
	}
	s := &session{ID: id, f: f, cfg: cfg, store: st, lock: lock, backend: backend}
	s.Conv = store.New(id, origin, "", store.Settings{
		Model: cfg.Model, BaseURL: cfg.BaseURL, ExecMode: cfg.ExecMode, MaxSteps: cfg.MaxSteps,
		Network: cfg.Network, NetworkAllow: networkPolicy(cfg).Allow,
	}, cfg.Sandbox)
	if err := s.create(ctx); err != nil {
		// No sandbox was made, so no code ran and nothing was uploaded:
		// the record is only the one create may have written.
		s.release()
		_ = st.Remove(id)
		return nil, err
	}
	if err := s.startRunner(ctx); err != nil {
		s.Close(ctx) // discards the conversation only while it is empty
		return nil, err
	}
	s.Agent = s.newAgent()
	s.awakeSince = time.Now()
	return s, nil
}

// resumeSession goes on with a stored conversation: ref is an id or a
// unique prefix of one, or "" for the latest. The model, endpoint and exec
// mode it used are kept unless the environment or a flag names others (see
// keepStored). Its sandbox is resumed, or, if it expired or vanished, replaced
// by a new one with the original uploads; either way the model is told what
// it lost. A resume that fails leaves the conversation as it was stored.
func resumeSession(ctx context.Context, f *Factory, cfg *config.Config, ref string) (*session, error) {
	st, err := f.Store()
	if err != nil {
		return nil, err
	}
	var id string
	if ref == "" {
		id, err = st.Latest()
	} else {
		id, err = st.Resolve(ref)
	}
	if err != nil {
		return nil, usageError{err}
	}
	lock, err := st.Lock(id)
	if err != nil {
		return nil, err
	}
	conv, err := st.Load(id)
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	if warning := keepStored(cfg, conv.Settings); warning != "" {
		fmt.Fprintln(f.IO.ErrOut, "warning: "+warning)
	}
	backend, err := f.NewBackend(cfg)
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	s := &session{ID: id, Conv: conv, f: f, cfg: cfg, store: st, lock: lock, backend: backend}
	if err := s.wake(ctx); err != nil {
		if s.Sandbox != nil {
			s.Close(ctx) // pauses it: Close discards only an empty conversation
		} else {
			s.release()
		}
		return nil, err
	}
	return s, nil
}

// wake brings a paused conversation back: its sandbox resumed, or replaced
// with the original uploads when it expired or vanished, and a fresh runner;
// the model is told what it lost. It serves resuming a stored conversation,
// and a chat whose sandbox was paused while the user was away.
func (s *session) wake(ctx context.Context) error {
	var note string
	// Asked before anything is saved, which records the mode used from now.
	lostVariables := s.ranInKernel()
	resumed := false
	if id := s.Conv.Sandbox.SessionID; id != "" && s.Conv.Sandbox.Backend == s.cfg.Sandbox {
		sbx, err := s.backend.Resume(ctx, sandbox.SessionID(id))
		switch {
		case err == nil:
			s.Sandbox, resumed = sbx, true
		case !errors.Is(err, sandbox.ErrExpired):
			return fmt.Errorf("resume the sandbox of conversation %s: %w", s.ID, err)
		}
	}
	if !resumed {
		if err := s.create(ctx); err != nil {
			return err
		}
		if err := s.uploadInputs(ctx); err != nil {
			return err
		}
		note = s.replacedNote()
	} else if lostVariables {
		// Every backend keeps files, not memory, across a pause, and the
		// runner below starts afresh.
		note = "The Python session was restarted since the last question: " +
			"variables and imports from earlier steps are gone, files in /work were kept."
		if kernel.Mode(s.cfg.ExecMode) == kernel.ModeScript {
			note = "Code now runs as a new Python script each time: variables and imports " +
				"from earlier steps are gone, files in /work were kept."
		}
	}
	if err := s.startRunner(ctx); err != nil {
		return err
	}
	var err error
	if s.Agent == nil {
		s.Agent = s.newAgent()
		err = s.Agent.Restore(ctx, s.Conv.Messages, s.Conv.Usage, s.Conv.Steps)
	} else {
		err = s.Agent.Rebind(ctx, s.Sandbox, s.Runner)
	}
	if err != nil {
		return err
	}
	if note != "" {
		s.Agent.Note(note)
	}
	s.paused = false
	s.awakeSince = time.Now()
	s.save()
	return nil
}

// ranInKernel reports whether code may have left variables in a kernel of
// this conversation: code ran (or began to) while it was in kernel mode. A
// record written before CodeRan existed shows it by a tool result.
func (s *session) ranInKernel() bool {
	if kernel.Mode(s.Conv.Settings.ExecMode) == kernel.ModeScript {
		return false
	}
	return s.Conv.CodeRan || slices.ContainsFunc(s.Conv.Messages, func(m llm.Message) bool { return m.Role == llm.RoleTool })
}

// suspend pauses the sandbox while the conversation stays open, as a chat
// does when its user has been away for idle_pause: a paused sandbox costs
// only disk. The next turn wakes it.
func (s *session) suspend(ctx context.Context) error {
	if s.paused || s.Sandbox == nil {
		return nil
	}
	_ = s.Runner.Close()
	id, err := s.Sandbox.Pause(ctx)
	if err != nil {
		return fmt.Errorf("pause the sandbox: %w", err)
	}
	s.Conv.Sandbox.SessionID = string(id)
	s.paused = true
	s.save()
	return nil
}

// Ask runs one turn. A sandbox paused while the user was away is woken
// first, and one that has lived its sandbox_timeout is renewed (paused and
// resumed, which restarts its lifetime); after the turn, the idle pause is
// armed again.
func (s *session) Ask(ctx context.Context, question string, send func(agent.Event)) (agent.Result, error) {
	if err := s.begin(ctx); err != nil {
		return agent.Result{StopReason: agent.Errored}, err
	}
	defer s.end()
	return s.Agent.Ask(ctx, question, send)
}

// begin readies the sandbox for work and holds off the idle pause until end.
// When it fails there is no end to come, so it lets the pause be armed again.
func (s *session) begin(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy++
	defer func() {
		if err != nil {
			s.busy--
		}
	}()
	if s.idle != nil {
		s.idle.Stop()
	}
	if !s.paused && s.cfg.SandboxTimeout > 0 && time.Since(s.awakeSince) > s.cfg.SandboxTimeout {
		if err := s.suspend(ctx); err != nil {
			return err
		}
	}
	if s.paused {
		return s.wake(ctx)
	}
	return nil
}

// end arms the idle pause once nothing runs.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if s.busy > 0 || s.cfg.IdlePause <= 0 || s.closed {
		return
	}
	if s.idle == nil {
		s.idle = time.AfterFunc(s.cfg.IdlePause, s.idleTimeout)
		return
	}
	s.idle.Reset(s.cfg.IdlePause)
}

func (s *session) idleTimeout() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy > 0 || s.closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.suspend(ctx); err != nil {
		fmt.Fprintln(s.f.IO.ErrOut, "warning: "+err.Error())
	}
}

// keepStored applies a stored conversation's settings to cfg, one rule for
// each: its model, endpoint and exec mode hold unless the user chose others
// for this command through the environment or a flag (a config file or the
// defaults, which may have changed since, never switch a conversation), and
// the record then keeps the new choice; its network policy, which its
// sandbox was made with, always holds: a different one asked for now is
// refused with the warning returned.
func keepStored(cfg *config.Config, stored store.Settings) (warning string) {
	explicit := func(key string) bool {
		k := cfg.Source(key).Kind
		return k == config.KindEnv || k == config.KindFlag
	}
	for _, kept := range []struct {
		key    string
		stored string
		value  *string
	}{
		{"model", stored.Model, &cfg.Model},
		{"base_url", stored.BaseURL, &cfg.BaseURL},
		{"exec_mode", stored.ExecMode, &cfg.ExecMode},
	} {
		if kept.stored != "" && !explicit(kept.key) {
			*kept.value = kept.stored
		}
	}
	was := sandbox.Network{Mode: sandbox.NetworkMode(stored.Network), Allow: stored.NetworkAllow}
	if was.Off() {
		// Also a conversation stored before network modes existed: it had none.
		was = sandbox.Network{Mode: sandbox.NetworkNone}
	}
	asked := networkPolicy(cfg)
	changed := asked.Mode != was.Mode || !slices.Equal(asked.Allow, was.Allow)
	if changed && (explicit("network") || explicit("network_allow")) {
		warning = fmt.Sprintf("this conversation's sandbox keeps network %s; start a new conversation for another", describeNetwork(was))
	}
	cfg.Network, cfg.NetworkAllow = string(was.Mode), was.Allow
	return warning
}

// create makes a new sandbox for the conversation and records its id at
// once, so a terp killed before its first step still leaves a conversation
// the next one can resume.
func (s *session) create(ctx context.Context) error {
	sbx, err := s.backend.Create(ctx, sandbox.Options{
		Timeout: s.cfg.SandboxTimeout,
		Limits: sandbox.Limits{
			MemoryBytes:   s.cfg.MemoryLimit,
			Processes:     s.cfg.ProcessLimit,
			FileSizeBytes: s.cfg.FileSizeLimit,
			WorkBytes:     s.cfg.MaxWorkSize,
		},
		Network: networkPolicy(s.cfg),
	})
	if err != nil {
		return fmt.Errorf("create the %s sandbox: %w", s.cfg.Sandbox, err)
	}
	s.Sandbox = sbx
	s.Conv.Sandbox = store.SandboxRef{Backend: s.cfg.Sandbox, SessionID: string(sbx.ID())}
	s.save()
	return nil
}

// startRunner starts the runner for the conversation's sandbox, as exec_mode
// says, wrapped so that the first run is recorded before it starts.
func (s *session) startRunner(ctx context.Context) error {
	r, err := newRunner(ctx, s.Sandbox, s.cfg)
	if err != nil {
		return err
	}
	s.Runner = recordingRunner{Runner: r, s: s}
	return nil
}

// recordingRunner saves, before the conversation's code first runs, that it
// ran (store.Conversation.CodeRan): no step may be saved before terp dies,
// yet from then on there are variables to lose and files to keep.
type recordingRunner struct {
	kernel.Runner
	s *session
}

func (r recordingRunner) Run(ctx context.Context, code string, timeout time.Duration) (kernel.Result, error) {
	if !r.s.Conv.CodeRan {
		r.s.Conv.CodeRan = true
		r.s.save()
	}
	return r.Runner.Run(ctx, code, timeout)
}

// newAgent makes the conversation's agent, which saves after every step.
func (s *session) newAgent() *agent.Agent {
	return agent.New(s.f.NewModel(s.cfg), s.Sandbox, s.Runner, withModelSettings(s.cfg, agent.Config{
		Model:      s.cfg.Model,
		MaxSteps:   s.cfg.MaxSteps,
		Timeout:    s.cfg.Timeout,
		ExecMode:   kernel.Mode(s.cfg.ExecMode),
		Network:    networkPolicy(s.cfg),
		Checkpoint: s.checkpoint,
	}))
}

// checkpoint saves the conversation after a completed step. It never fails:
// a save that fails is a warning (see save), for the turn is worth more than
// its record, and the next checkpoint saves it all.
func (s *session) checkpoint(c agent.Checkpoint) error {
	s.Conv.Messages = c.Messages
	s.Conv.Usage = c.Usage
	s.Conv.Steps = c.Steps
	if c.TurnDone {
		s.Conv.Turns++
	}
	if s.Conv.Title == "" {
		s.Conv.SetTitle(firstQuestion(c.Messages))
	}
	s.save()
	return nil
}

// save writes the whole record with the settings the conversation now runs
// with. A save that fails (a full disk, a store made read-only) ends nothing
// and damages nothing: store.Save replaces the old record atomically, so it
// stays as it was; the conversation goes on in memory and the user is told
// once; every later save (the next step, a pause, Close) writes everything
// again, so the first that succeeds stores it all, the sandbox's pause id
// included.
func (s *session) save() {
	s.Conv.Settings.Model = s.cfg.Model
	s.Conv.Settings.BaseURL = s.cfg.BaseURL
	s.Conv.Settings.ExecMode = s.cfg.ExecMode
	err := s.store.Save(s.Conv)
	switch {
	case err != nil && s.unsaved == nil:
		fmt.Fprintf(s.f.IO.ErrOut, "warning: %v; the conversation goes on and the record stored before is intact: "+
			"free space in %s (or make it writable) and terp saves everything after the next step or on exit\n",
			err, s.store.Dir())
	case err == nil && s.unsaved != nil:
		fmt.Fprintf(s.f.IO.ErrOut, "terp: conversation %s is saved again\n", s.ID)
	}
	s.unsaved = err
}

// firstQuestion is the user's first message without the notes terp put
// before it.
func firstQuestion(msgs []llm.Message) string {
	for _, m := range msgs {
		if m.Role != llm.RoleUser {
			continue
		}
		q := m.Content
		for strings.HasPrefix(q, "(") {
			i := strings.Index(q, ")\n")
			if i < 0 {
				break
			}
			q = strings.TrimLeft(q[i+2:], "\n")
		}
		return q
	}
	return ""
}

// replacedNote tells the model that its sandbox is new.
func (s *session) replacedNote() string {
	note := "This conversation's sandbox had expired, so a new one was created: files saved by " +
		"earlier steps and all variables are gone."
	if len(s.Conv.Inputs) > 0 {
		names := make([]string, len(s.Conv.Inputs))
		for i, in := range s.Conv.Inputs {
			names[i] = sandbox.WorkDir + "/" + in.Name
		}
		note += " The uploaded files were uploaded again: " + strings.Join(names, ", ") + "."
	}
	return note
}

// newRunner starts what runs the model's code in sbx, as exec_mode says.
func newRunner(ctx context.Context, sbx sandbox.Sandbox, cfg *config.Config) (kernel.Runner, error) {
	if kernel.Mode(cfg.ExecMode) == kernel.ModeScript {
		return kernel.NewScript(sbx, cfg.MaxStdout, cfg.MaxStderr), nil
	}
	// The kernel lives as long as the conversation, not as the command's
	// context: Ctrl+C stops the step that is running (Run's context), and
	// Close stops the kernel.
	k, err := kernel.Start(context.WithoutCancel(ctx), sbx, kernel.Options{Prewarm: cfg.Prewarm, MaxStdout: cfg.MaxStdout, MaxStderr: cfg.MaxStderr})
	if err != nil {
		return nil, fmt.Errorf("start the Python kernel: %w", err)
	}
	return k, nil
}

// Upload copies the host file at path to /work/<basename>, and keeps a copy
// with the conversation so it can be uploaded again if the sandbox is lost.
func (s *session) Upload(ctx context.Context, path string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	name := filepath.Base(path)
	kept := filepath.Join(s.store.InputsDir(s.ID), name)
	n, err := copyFile(path, kept)
	if pe := (*os.PathError)(nil); errors.As(err, &pe) && pe.Path == path {
		return usagef("cannot upload %s: %v", path, pe.Err)
	}
	if err != nil {
		return fmt.Errorf("cannot upload %s: keeping a copy with the conversation failed (%w); free space in %s and upload it again",
			path, err, s.store.Dir())
	}
	fh, err := os.Open(kept)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := s.Agent.Upload(ctx, name, fh); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	s.Conv.Inputs = appendStored(s.Conv.Inputs, store.File{Name: name, Path: abs, Bytes: n})
	s.save()
	return nil
}

// uploadInputs puts a conversation's kept uploads into a new sandbox.
func (s *session) uploadInputs(ctx context.Context) error {
	for _, in := range s.Conv.Inputs {
		fh, err := os.Open(filepath.Join(s.store.InputsDir(s.ID), in.Name))
		if err != nil {
			return fmt.Errorf("upload %s again: %w", in.Name, err)
		}
		err = s.Sandbox.WriteFile(ctx, sandbox.WorkDir+"/"+in.Name, fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("upload %s again: %w", in.Name, err)
		}
	}
	return nil
}

// copyFile copies src to dst, creating dst's directory. The copy is written
// beside dst and renamed over it, so a copy that fails (a full disk) leaves
// an earlier upload of the same name whole.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, err
	}
	out, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(out.Name()) // fails harmlessly after the rename
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	return n, err
}

// appendStored adds f, replacing an earlier file of the same name.
func appendStored(files []store.File, f store.File) []store.File {
	for i := range files {
		if files[i].Name == f.Name {
			files[i] = f
			return files
		}
	}
	return append(files, f)
}

// OutDir is where files the code saved are downloaded: out_dir, or a new
// directory per conversation under the current one.
func (s *session) OutDir() string {
	if s.cfg.OutDir != "" {
		return s.cfg.OutDir
	}
	return "terp-" + s.ID
}

// savedFile is one downloaded file, as `ask --json` reports it.
type savedFile struct {
	Path        string `json:"path"`
	SandboxPath string `json:"sandbox_path"`
	Bytes       int64  `json:"bytes"`
}

// Download fetches the files the code saved into the output directory: the
// configured one, or a new directory per conversation under the current one.
// A file over the size cap is skipped with a warning; the others still come.
// A file already in the directory under the same name is kept, and the new
// one saved under a numbered name (see agent.Downloads.Get), which a note on
// stderr names besides the path reported.
func (s *session) Download(ctx context.Context, files []sandbox.FileInfo) ([]savedFile, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// Downloads happen even after Ctrl+C: the files are the user's results.
	ctx = context.WithoutCancel(ctx)
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	dir := s.OutDir()
	dl := agent.NewDownloads(dir, s.cfg.MaxDownloadSize, s.cfg.MaxDownloadTotal)
	var out []savedFile
	var errs []error
	for _, fi := range files {
		if fi.Size > s.cfg.MaxDownloadSize {
			fmt.Fprintf(s.f.IO.ErrOut, "warning: skipped /work/%s: %s is over max_download_size (%s)\n",
				sanitize.Terminal(fi.Path), tui.SizeText(fi.Size), tui.SizeText(s.cfg.MaxDownloadSize))
			continue
		}
		p, n, err := dl.Get(ctx, s.Sandbox, fi.Path)
		if errors.Is(err, agent.ErrOverTotal) {
			continue // named in dl.Warning below
		}
		if errors.Is(err, fs.ErrNotExist) {
			// Saved by one step and removed by a later one.
			fmt.Fprintf(s.f.IO.ErrOut, "warning: skipped /work/%s: the code removed it before the turn ended\n", sanitize.Terminal(fi.Path))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want := filepath.Join(dir, filepath.FromSlash(fi.Path)); p != want {
			fmt.Fprintf(s.f.IO.ErrOut, "note: %s was already there and is kept; /work/%s is saved as %s\n",
				sanitize.Terminal(want), sanitize.Terminal(fi.Path), sanitize.Terminal(p))
		}
		out = append(out, savedFile{Path: p, SandboxPath: sandbox.WorkDir + "/" + fi.Path, Bytes: n})
		abs, _ := filepath.Abs(p)
		s.Conv.Downloads = appendStored(s.Conv.Downloads, store.File{Name: fi.Path, Path: abs, Bytes: n})
	}
	if w := dl.Warning(s.ID); w != "" {
		fmt.Fprintln(s.f.IO.ErrOut, "warning: "+sanitize.Terminal(w))
	}
	s.save()
	if len(errs) > 0 {
		return out, fmt.Errorf("download files: %w", errors.Join(errs...))
	}
	return out, nil
}

// Files lists /work as the user knows it: files only, without terp's own
// directory.
func (s *session) Files(ctx context.Context) ([]sandbox.FileInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	all, err := s.Sandbox.List(ctx, sandbox.WorkDir)
	if err != nil && !errors.Is(err, sandbox.ErrListTruncated) {
		return nil, err
	}
	if err != nil {
		err = fmt.Errorf("/work holds more files than are listed: %w", err)
	}
	return agent.Visible(all), err
}

// Close stops the runner, pauses the sandbox so that a later command can
// resume the conversation, saves the record and lets the conversation go.
// The caller's context may be cancelled by now (Ctrl+C); this must still
// happen.
func (s *session) Close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.Runner != nil {
		_ = s.Runner.Close()
	}
	if s.Sandbox != nil && s.empty() {
		// Nothing was said, run or uploaded (a chat left at once, a
		// question the server refused, a kernel that would not start):
		// nothing is worth keeping.
		if err := s.Sandbox.Close(ctx); err != nil {
			fmt.Fprintln(s.f.IO.ErrOut, "warning: removing the sandbox: "+err.Error())
		}
		_ = s.store.Remove(s.ID)
		s.release()
		return
	}
	if s.Sandbox != nil && !s.paused {
		id, err := s.Sandbox.Pause(ctx)
		if err != nil {
			fmt.Fprintln(s.f.IO.ErrOut, "warning: pausing the sandbox: "+err.Error())
		} else {
			s.Conv.Sandbox.SessionID = string(id)
		}
		s.save()
	} else if s.unsaved != nil {
		s.save()
	}
	if s.unsaved != nil {
		fmt.Fprintf(s.f.IO.ErrOut, "warning: conversation %s could not be saved on exit (%v): what is stored of it is "+
			"as of its last save that worked, and its sandbox is kept; free space in %s before going on with it (terp ask --resume %s)\n",
			s.ID, s.unsaved, s.store.Dir(), s.ID)
	}
	s.release()
}

// empty reports whether the conversation holds nothing of the user's: no
// message, no code that ran, no upload, not even one whose copy was kept
// before the sandbox refused it. Only such a conversation is ever discarded
// without the user asking; every error path keeps the others, paused, to be
// resumed.
func (s *session) empty() bool {
	if len(s.Conv.Messages) > 0 || s.Conv.CodeRan || len(s.Conv.Inputs) > 0 {
		return false
	}
	kept, err := os.ReadDir(s.store.InputsDir(s.ID))
	return errors.Is(err, os.ErrNotExist) || (err == nil && len(kept) == 0)
}

// release lets another process open the conversation.
func (s *session) release() {
	if s.lock != nil {
		_ = s.lock.Unlock()
		s.lock = nil
	}
}

// removeConversation deletes a conversation: its sandbox, wherever it is, then its
// record. It is what `terp sessions rm` does.
func removeConversation(ctx context.Context, f *Factory, cfg *config.Config, st *store.Store, conv *store.Conversation) error {
	if conv.Sandbox.SessionID != "" {
		// The sandbox lives on the backend the record names, whatever
		// this command's configuration says.
		own := *cfg
		if conv.Sandbox.Backend != "" {
			own.Sandbox = conv.Sandbox.Backend
		}
		backend, err := f.NewBackend(&own)
		if err != nil {
			return fmt.Errorf("remove the sandbox of conversation %s (on %s): %w", conv.ID, own.Sandbox, err)
		}
		sbx, err := backend.Resume(ctx, sandbox.SessionID(conv.Sandbox.SessionID))
		switch {
		case err == nil:
			if err := sbx.Close(ctx); err != nil {
				return fmt.Errorf("remove the sandbox of conversation %s: %w", conv.ID, err)
			}
		case !errors.Is(err, sandbox.ErrExpired):
			return fmt.Errorf("remove the sandbox of conversation %s: %w", conv.ID, err)
		}
	}
	return st.Remove(conv.ID)
}

// networkPolicy is the sandbox's egress policy the configuration asks for.
func networkPolicy(cfg *config.Config) sandbox.Network {
	n := sandbox.Network{Mode: sandbox.NetworkMode(cfg.Network)}
	if n.Mode == sandbox.NetworkAllowlist {
		n.Allow = cfg.NetworkAllow
	}
	return n
}

// describeNetwork is a policy as a user would write it: "allowlist (a, b)".
func describeNetwork(n sandbox.Network) string {
	if n.Mode == sandbox.NetworkAllowlist {
		return fmt.Sprintf("%s (%s)", n.Mode, strings.Join(n.Allow, ", "))
	}
	if n.Off() {
		return string(sandbox.NetworkNone)
	}
	return string(n.Mode)
}
