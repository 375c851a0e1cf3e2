package conversation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/config"
	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/store"
)

// Turn is the outcome of one question.
type Turn struct {
	Result agent.Result
	// Files are the files the code saved, downloaded (none with
	// Options.KeepFiles: Result.Files names them in the sandbox).
	Files []File
	// Warnings are what the user should know that did not end the turn, in
	// the order they happened: the agent's notices (Result.Notices), saves
	// that failed, files that were not downloaded, and what happened
	// between turns. Each was also sent to the turn's send function as an
	// agent.Notice, so a front-end that shows the events has shown them
	// all.
	Warnings []string
	// History is the conversation as the model has it once the turn is
	// over, as History would return it then: a front-end that keeps it to
	// rewind to later (TurnRequest.Rewind) has this turn's, never that of
	// a turn another request ran after it. It is empty when the turn was
	// refused.
	History []llm.Message
}

// File is a file downloaded from the sandbox.
type File struct {
	// Name is the path relative to /work.
	Name string `json:"-"`
	// Path is where it was written on this machine, as the user would
	// type it (relative to the current directory by default).
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// SandboxPath is where the file was in the sandbox.
func (f File) SandboxPath() string { return path.Join(sandbox.WorkDir, f.Name) }

// TurnRequest is one turn with the settings it runs with. Turn applies them
// under the turn lock, once the sandbox is ready and just before the agent
// runs, so that no other request comes between them and their turn, and a
// turn that is refused changes none of them. Each holds for the following
// turns too, as a setter's would.
type TurnRequest struct {
	// Question is what the user asks; it may be empty only with Outputs.
	Question string
	// Outputs answer the client tool calls the last turn ended on
	// (agent.ClientToolCalls). With any, the turn goes on with them, and
	// with Question when it is not empty (see agent.Agent.Continue);
	// outputs that do not match the pending calls are refused with an
	// error wrapping agent.ErrUnmatchedOutputs, and the calls stay pending.
	// Without, the turn asks Question, and calls still pending are closed
	// as calls the client gave no result for.
	Outputs []agent.ClientOutput
	// Model is the model of this turn and the following ones; "" keeps
	// the conversation's.
	Model string
	// ClientTools, when not nil, replaces the function tools the caller
	// runs itself (see SetClientTools); a pointer to an empty list removes
	// them. A list the agent would refuse (agent.CheckClientTools) refuses
	// the turn with an InputError.
	ClientTools *[]llm.Tool
	// Rewind, when not nil, makes the turn go on from that history (one
	// History or Turn.History returned) instead of from the last turn, as
	// Rewind does: /work stays as it is, a pointer to an empty history
	// starts afresh, and one to the history the conversation has already
	// changes nothing, so a front-end may give the history it means with
	// every turn. Outputs answer the calls the rewound history ends on.
	Rewind *[]llm.Message
	// Options are the client's settings of this turn (sampling, its
	// instructions, its output budget); the zero value leaves them all to
	// terp and the server. They hold for this turn only.
	Options agent.TurnOptions
	// Images are images the user attached (data URLs), which the model
	// sees with the question when its profile says it takes images; they
	// are files in /work besides, which the caller put there.
	Images []string
	// Send receives the turn's events; it may be nil.
	Send func(agent.Event)
}

// Turn runs one turn as req says: its settings applied, its question asked
// or its client outputs handed back, its events sent to req.Send. Then it
// downloads the files the code saved, whatever the outcome, even after the
// context was cancelled: they are the user's results. It is refused at once
// with ErrBusy while another turn or run of the conversation goes on, and
// with an InputError when req.ClientTools cannot be offered, before
// anything changes. A turn's error comes back with the Turn filled in as
// far as it got.
func (c *Conversation) Turn(ctx context.Context, req TurnRequest) (Turn, error) {
	refused := Turn{Result: agent.Result{StopReason: agent.Errored}}
	if req.ClientTools != nil {
		if err := agent.CheckClientTools(*req.ClientTools); err != nil {
			return refused, &InputError{err}
		}
	}
	unlock, err := c.lockTurn(ctx, refuse)
	if err != nil {
		return refused, err
	}
	defer unlock()
	send := req.Send
	if send == nil {
		send = func(agent.Event) {}
	}
	// What happened since the last turn is heard first.
	c.startTelling(send)
	defer c.stopTelling() // for a turn that panicked; after the one below it does nothing

	turn, err := c.runAgent(ctx, send, req)
	turn.Warnings = append(append([]string(nil), turn.Result.Notices...), c.stopTelling()...)
	turn.History = c.agent.Messages()
	return turn, err
}

// Ask runs one turn that asks question, sending its events to send (which
// may be nil), with the settings the conversation has: Turn with only a
// question.
func (c *Conversation) Ask(ctx context.Context, question string, send func(agent.Event)) (Turn, error) {
	return c.Turn(ctx, TurnRequest{Question: question, Send: send})
}

// runAgent runs req's turn on a ready sandbox, then the downloads. The
// caller holds the turn lock.
func (c *Conversation) runAgent(ctx context.Context, send func(agent.Event), req TurnRequest) (Turn, error) {
	if err := c.begin(ctx); err != nil {
		return Turn{Result: agent.Result{StopReason: agent.Errored}}, err
	}
	if err := c.apply(ctx, req); err != nil {
		c.end()
		return Turn{Result: agent.Result{StopReason: agent.Errored}}, err
	}
	record := func(e agent.Event) {
		if o, ok := e.(agent.ToolOutput); ok && o.Value != "" {
			c.recMu.Lock()
			if c.rec.Values == nil {
				c.rec.Values = map[string]string{}
			}
			c.rec.Values[o.ID] = o.Value
			c.recMu.Unlock()
		}
		send(e)
	}
	var res agent.Result
	var err error
	if len(req.Outputs) > 0 {
		res, err = c.agent.Continue(ctx, req.Outputs, req.Question, record)
	} else {
		res, err = c.agent.Ask(ctx, req.Question, record)
	}
	c.end()
	turn := Turn{Result: res}
	if c.keepFiles {
		return turn, err
	}
	files, dlErr := c.download(ctx, res.Files)
	turn.Files = files
	if err == nil {
		err = dlErr
	} else if dlErr != nil {
		c.warn(dlErr.Error())
	}
	return turn, err
}

// apply makes req's settings the conversation's, for its turn and the
// following ones. The caller holds the turn lock and has readied the
// sandbox, which a rewind looks at; the client tools were checked before
// the lock was taken, so that only a sandbox that fails a rewind's look at
// /work can fail it.
func (c *Conversation) apply(ctx context.Context, req TurnRequest) error {
	if req.Rewind != nil {
		if err := c.rewind(ctx, *req.Rewind); err != nil {
			return err
		}
	}
	if req.ClientTools != nil {
		if err := c.agent.SetClientTools(*req.ClientTools); err != nil {
			return &InputError{err}
		}
	}
	if req.Model != "" {
		c.setModel(req.Model)
	}
	c.agent.SetTurnOptions(req.Options)
	c.recMu.Lock()
	images := c.cfg.ForModel(c.cfg.Model).Images
	c.recMu.Unlock()
	if images && len(req.Images) > 0 {
		c.agent.Show(req.Images)
	}
	return nil
}

// SetModel switches the model of the following turns, and of the record.
// It waits for a running turn to end, or returns ctx's error first.
func (c *Conversation) SetModel(ctx context.Context, name string) error {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	c.setModel(name)
	return nil
}

// setModel is SetModel for a caller that holds the turn lock.
func (c *Conversation) setModel(name string) {
	c.agent.SetModel(name)
	c.recMu.Lock()
	c.cfg.Model = name
	c.recMu.Unlock()
}

// SetMaxSteps changes the step cap of the following turns; a cap below one
// changes nothing. It waits for a running turn to end, or returns ctx's
// error first.
func (c *Conversation) SetMaxSteps(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	c.agent.SetMaxSteps(n)
	c.recMu.Lock()
	c.cfg.MaxSteps = n
	c.recMu.Unlock()
	return nil
}

// Info describes a conversation for a status line or a listing.
type Info struct {
	ID       string
	Model    string
	Sandbox  string
	MaxSteps int
	// Earlier counts the questions asked before it was opened, in a stored
	// conversation that goes on.
	Earlier int
	// Past are the last of those questions with their answers.
	Past []Exchange
}

// Exchange is one earlier question and its answer ("" when it got none).
type Exchange struct {
	Question, Answer string
}

// Info describes the conversation as it is now. It never waits for a turn.
func (c *Conversation) Info() Info {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	return Info{ID: c.ID, Model: c.cfg.Model, Sandbox: c.cfg.Sandbox, MaxSteps: c.cfg.MaxSteps,
		Earlier: c.earlier, Past: c.past}
}

// maxPast is how many earlier exchanges Info carries.
const maxPast = 10

// pastExchanges are the last n questions of a stored conversation with the
// answer each got: a user message (without the notes terp put before it)
// and the last assistant text before the next question.
func pastExchanges(msgs []llm.Message, n int) []Exchange {
	var out []Exchange
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleUser && m.Content == agent.EmptyReplyNudge:
			// terp's, not the user's
		case m.Role == llm.RoleUser:
			if q := firstQuestion([]llm.Message{m}); q != "" {
				out = append(out, Exchange{Question: q})
			}
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) == 0 && m.Content != "" && len(out) > 0:
			out[len(out)-1].Answer = m.Content
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
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

// Upload copies the host file at p to /work/<basename>, keeps a copy with
// the conversation so it can be uploaded again if the sandbox is lost, and
// returns where it landed in the sandbox.
func (c *Conversation) Upload(ctx context.Context, p string) (string, error) {
	if err := CheckUploads([]string{p}); err != nil {
		return "", err
	}
	fh, err := os.Open(p)
	if err != nil {
		return "", inputErrorf("cannot upload %s: %v", p, unwrapPath(err))
	}
	defer fh.Close()
	abs, _ := filepath.Abs(p)
	return c.put(ctx, filepath.Base(p), abs, fh)
}

// Put writes r to /work/name as an upload of the user's, as Upload does a
// host file: kept with the conversation, uploaded again if the sandbox is
// lost. name is a plain file name. It comes from a client, so what the
// disk would refuse (a NUL, more than 255 bytes) is refused here as the
// client's mistake, not failed on as terp's own; and so is "/", its own
// base, which would be kept in place of the uploads' directory.
func (c *Conversation) Put(ctx context.Context, name string, r io.Reader) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") ||
		strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return "", inputErrorf("cannot upload %q: give a plain file name of at most 255 bytes, not a path or a hidden name", name)
	}
	return c.put(ctx, name, "", r)
}

// put keeps r as the upload name, recorded as from origin (a host path, or
// "" when it came over the network), and writes it to /work. The agent
// lists the upload to the model with the next question and looks at /work
// anew, which must not happen while a turn runs (it would race with the
// turn's own look at /work), so put waits for a running turn to end, or
// returns ctx's error first.
func (c *Conversation) put(ctx context.Context, name, origin string, r io.Reader) (string, error) {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := c.begin(ctx); err != nil {
		return "", err
	}
	defer c.end()
	n, err := c.svc.store.PutInput(c.ID, name, r)
	if err != nil {
		return "", fmt.Errorf("cannot upload %s: keeping a copy with the conversation failed (%w); free space in %s and upload it again",
			name, err, c.svc.store.Where())
	}
	fh, err := c.svc.store.OpenInput(c.ID, name)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if err := c.agent.Upload(ctx, name, fh); err != nil {
		return "", err
	}
	c.update(func(r *store.Conversation) {
		r.Inputs = appendStored(r.Inputs, store.File{Name: name, Path: origin, Bytes: n})
	})
	return path.Join(sandbox.WorkDir, name), nil
}

// ReadFile opens the file name (relative to /work) in the sandbox.
func (c *Conversation) ReadFile(ctx context.Context, name string) (io.ReadCloser, error) {
	rel, err := workPath(name)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	defer c.end()
	return c.sbx.ReadFile(ctx, path.Join(sandbox.WorkDir, rel))
}

// RemoveFile deletes the file name (relative to /work) from the sandbox,
// and from the uploads kept with the conversation.
func (c *Conversation) RemoveFile(ctx context.Context, name string) error {
	rel, err := workPath(name)
	if err != nil {
		return err
	}
	if err := c.begin(ctx); err != nil {
		return err
	}
	defer c.end()
	res, err := c.sbx.Exec(ctx, []string{"rm", "-f", "--", path.Join(sandbox.WorkDir, rel)}, sandbox.ExecOptions{Timeout: time.Minute})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("remove /work/%s: %s", rel, strings.TrimSpace(res.Stderr))
	}
	c.update(func(r *store.Conversation) {
		r.Inputs = slices.DeleteFunc(r.Inputs, func(f store.File) bool { return f.Name == rel })
	})
	c.tell() // a turn may be running: it hears of a save that failed
	_ = c.svc.store.RemoveInput(c.ID, rel)
	return nil
}

// WriteFile writes r to the file name (relative to /work, directories
// made as needed) in the sandbox, for a front-end whose client keeps its
// own copies and sends them back (LibreChat's file references): unlike
// Put, nothing is kept with the conversation, and the file is not the
// model's to hear of. The next run does not report it as one the code
// saved. It waits for a running turn or run to end, or returns ctx's error
// first.
func (c *Conversation) WriteFile(ctx context.Context, name string, r io.Reader) error {
	rel, err := workPath(name)
	if err != nil {
		return err
	}
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.begin(ctx); err != nil {
		return err
	}
	defer c.end()
	return c.agent.Place(ctx, rel, r)
}

// workPath is name as a path inside /work, refusing one that leaves it.
func workPath(name string) (string, error) {
	rel := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(sandbox.WorkName(name), sandbox.WorkDir+"/")), "/")
	if rel == "" || rel == "." {
		return "", inputErrorf("%q names no file in /work", name)
	}
	return rel, nil
}

// uploadInputs puts a conversation's kept uploads into a new sandbox.
func (c *Conversation) uploadInputs(ctx context.Context) error {
	for _, in := range c.rec.Inputs {
		fh, err := c.svc.store.OpenInput(c.ID, in.Name)
		if err != nil {
			return fmt.Errorf("upload %s again: %w", in.Name, err)
		}
		err = c.sbx.WriteFile(ctx, sandbox.WorkDir+"/"+in.Name, fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("upload %s again: %w", in.Name, err)
		}
	}
	return nil
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
func (c *Conversation) OutDir() string {
	if c.cfg.OutDir != "" {
		return c.cfg.OutDir
	}
	return "terp-" + c.ID
}

// Download copies the file name (relative to /work) to the output directory.
func (c *Conversation) Download(ctx context.Context, name string) (File, error) {
	name, err := workPath(name)
	if err != nil {
		return File{}, err
	}
	files, err := c.download(ctx, []sandbox.FileInfo{{Path: name}})
	if len(files) == 0 {
		if err == nil {
			// Skipped, with the warning saying why.
			w := c.Warnings()
			err = errors.New(strings.Join(w, "; "))
		}
		return File{}, err
	}
	return files[0], err
}

// download fetches files into the output directory. A file over the size
// cap is skipped with a warning; the others still come. A file already in
// the directory under the same name is kept, and the new one saved under a
// numbered name (see agent.Downloads.Get), which a warning names.
func (c *Conversation) download(ctx context.Context, files []sandbox.FileInfo) ([]File, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// Downloads happen even after Ctrl+C: the files are the user's results.
	ctx = context.WithoutCancel(ctx)
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	defer c.end()
	dir := c.OutDir()
	dl := agent.NewDownloads(dir, c.cfg.MaxDownloadSize, c.cfg.MaxDownloadTotal)
	var out []File
	var errs []error
	for _, fi := range files {
		if fi.Size > c.cfg.MaxDownloadSize {
			c.warn(fmt.Sprintf("skipped /work/%s: %s is over max_download_size (%s)",
				fi.Path, config.SizeText(fi.Size), config.SizeText(c.cfg.MaxDownloadSize)))
			continue
		}
		p, n, err := dl.Get(ctx, c.sbx, fi.Path)
		if errors.Is(err, agent.ErrOverTotal) {
			continue // named in dl.Warning below
		}
		if errors.Is(err, fs.ErrNotExist) {
			c.warn(fmt.Sprintf("skipped /work/%s: it is not there (the code may have removed it before the turn ended)", fi.Path))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want := filepath.Join(dir, filepath.FromSlash(fi.Path)); p != want {
			c.warn(fmt.Sprintf("%s was already there and is kept; /work/%s is saved as %s", want, fi.Path, p))
		}
		out = append(out, File{Name: fi.Path, Path: p, Bytes: n})
	}
	if w := dl.Warning(c.ID); w != "" {
		c.warn(w)
	}
	c.update(func(r *store.Conversation) {
		for _, f := range out {
			abs, _ := filepath.Abs(f.Path)
			r.Downloads = appendStored(r.Downloads, store.File{Name: f.Name, Path: abs, Bytes: f.Bytes})
		}
	})
	c.tell()
	if len(errs) > 0 {
		return out, fmt.Errorf("download files: %w", errors.Join(errs...))
	}
	return out, nil
}

// Files lists /work as the user knows it: files only, without terp's own
// directory. A listing cut short comes with its error and still holds the
// newest files.
func (c *Conversation) Files(ctx context.Context) ([]sandbox.FileInfo, error) {
	if err := c.begin(ctx); err != nil {
		return nil, err
	}
	defer c.end()
	all, err := c.sbx.List(ctx, sandbox.WorkDir)
	if err != nil && !errors.Is(err, sandbox.ErrListTruncated) {
		return nil, err
	}
	if err != nil {
		err = fmt.Errorf("/work holds more files than are listed: %w", err)
	}
	return agent.Visible(all), err
}

// History is the conversation as the model has it: every message of every
// turn, code and output included. It waits for a running turn to end, or
// returns ctx's error first.
func (c *Conversation) History(ctx context.Context) ([]llm.Message, error) {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.agent.Messages(), nil
}

// Rewind makes the next turn go on from messages, a history an earlier
// History returned (nil starts afresh), with /work as it is now: for a
// front-end whose client names the turn it continues (the Responses API's
// previous_response_id), which need not be the last one. A rewind to the
// history it has already changes nothing. It waits for a running turn to
// end, or returns ctx's error first.
func (c *Conversation) Rewind(ctx context.Context, messages []llm.Message) error {
	unlock, err := c.lockTurn(ctx, wait)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.begin(ctx); err != nil {
		return err
	}
	defer c.end()
	return c.rewind(ctx, messages)
}

// rewind is Rewind for a caller that holds the turn lock and has readied
// the sandbox. A rewind to the history the conversation has already is
// none: it costs no look at /work and no save, so that a front-end may give
// the history it means with every turn (terp serve gives the one its
// client's previous_response_id names, mostly the last), deciding nothing
// outside the turn lock.
func (c *Conversation) rewind(ctx context.Context, messages []llm.Message) error {
	if sameMessages(messages, c.agent.Messages()) {
		return nil
	}
	c.recMu.Lock()
	usage, steps := c.rec.Usage, c.rec.Steps
	c.recMu.Unlock()
	if err := c.agent.Restore(ctx, messages, usage, steps); err != nil {
		return err
	}
	c.update(func(r *store.Conversation) { r.Messages = slices.Clone(messages) })
	c.tell()
	return nil
}

// sameMessages reports whether a and b are the same history, no tool calls
// the same as an empty list of them, as a history kept as JSON comes back.
// Any other difference counts, so that a field added to llm.Message one day
// can only cost a rewind that was not needed, never skip one that was.
func sameMessages(a, b []llm.Message) bool {
	return slices.EqualFunc(a, b, func(x, y llm.Message) bool {
		if len(x.ToolCalls) == 0 && len(y.ToolCalls) == 0 {
			x.ToolCalls, y.ToolCalls = nil, nil
		}
		return reflect.DeepEqual(x, y)
	})
}
