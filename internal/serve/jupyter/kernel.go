package jupyter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/terpdev/terp/internal/kernel"
	"github.com/terpdev/terp/internal/serve"
)

// maxFigure bounds a figure sent as display_data: a larger file is named,
// not sent.
const maxFigure = 16 << 20

// queueLen is how many shell requests may wait for the one running.
const queueLen = 256

// hub is a kernel live in this process: its websocket connections, and
// its shell requests, run one at a time in the order they came, as a
// kernel runs them.
type hub struct {
	a         *api
	id, owner string
	// session is the kernel's own session id, in its messages' headers.
	session string

	mu    sync.Mutex
	conns map[*conn]struct{}
	// queue holds the shell requests waiting, for the loop that runs them,
	// one at a time for the hub's life: the hub ends (done) once it has
	// no connection and nothing to run, so that no two loops ever run
	// the same kernel's code at once.
	queue chan request
	done  bool
	// busy is set while a request runs; cancel interrupts the execution
	// that runs.
	busy   bool
	cancel context.CancelFunc
	// cell is the execution count of the last execution, which the next
	// one's execute_input announces one past.
	cell int
}

// request is a shell request and the connection it came on, which gets
// the reply.
type request struct {
	m  message
	on *conn
}

func newHub(a *api, id, owner string) *hub {
	k := &hub{a: a, id: id, owner: owner, session: newUUID(), conns: map[*conn]struct{}{}, queue: make(chan request, queueLen)}
	go k.loop()
	return k
}

func (k *hub) connections() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conns)
}

func (k *hub) executionState() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.busy {
		return "busy"
	}
	return "idle"
}

// attach adds a connection.
func (k *hub) attach(c *conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conns[c] = struct{}{}
}

// detach drops a connection, and ends the hub if it was the last and
// nothing runs.
func (k *hub) detach(c *conn) {
	k.mu.Lock()
	delete(k.conns, c)
	k.mu.Unlock()
	k.endIfIdle()
}

// endIfIdle ends the hub when it has no connection and nothing runs or
// waits: the kernel itself (the container) lives on, and its next
// connection gets a new hub. The API's lock is taken first, so that no
// connection finds the hub as it ends.
func (k *hub) endIfIdle() {
	k.a.mu.Lock()
	defer k.a.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done || len(k.conns) > 0 || k.busy || len(k.queue) > 0 {
		return
	}
	k.done = true
	close(k.queue)
	if k.a.kernels[k.id] == k {
		delete(k.a.kernels, k.id)
	}
}

// submit queues a shell request, or answers it busy when too many wait.
// Only a connection of the hub's submits, so the hub has not ended.
func (k *hub) submit(r request) {
	select {
	case k.queue <- r:
	default:
		k.reply(r, "error", map[string]any{"status": "error", "ename": "KernelBusy",
			"evalue": fmt.Sprintf("%d requests wait for this kernel already; send this one again later", queueLen), "traceback": []string{}})
	}
}

func (k *hub) loop() {
	for r := range k.queue {
		k.handle(r)
		k.endIfIdle()
	}
}

// interrupt stops the execution that runs, as KeyboardInterrupt in its
// code: the kernel keeps its state.
func (k *hub) interrupt() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancel != nil {
		k.cancel()
	}
}

// shutdown interrupts what runs and ends every connection.
func (k *hub) shutdown() {
	k.interrupt()
	for _, c := range k.connList() {
		// A normal closure: the client does not try to reconnect to a
		// kernel that is gone.
		_ = c.ws.Close(websocket.StatusNormalClosure, "the kernel was shut down")
	}
}

// restart gives the kernel a fresh Python in the same sandbox, its files
// kept, telling the connections as Jupyter does.
func (k *hub) restart(ctx context.Context, l *serve.Lease) error {
	k.interrupt()
	k.broadcast(nil, "status", map[string]string{"execution_state": "restarting"})
	if err := l.Container().Conversation().Restart(ctx); err != nil {
		return err
	}
	k.mu.Lock()
	k.cell = 0
	k.mu.Unlock()
	k.broadcast(nil, "status", map[string]string{"execution_state": "starting"})
	k.broadcast(nil, "status", map[string]string{"execution_state": "idle"})
	return nil
}

// handle runs one shell request, between the status messages that say the
// kernel is busy with it and idle again.
func (k *hub) handle(r request) {
	k.setBusy(true, nil)
	defer k.setBusy(false, nil)
	k.status(r, "busy")
	defer k.status(r, "idle")
	switch t := r.m.Header.MsgType; t {
	case "execute_request":
		k.execute(r)
	case "kernel_info_request":
		k.reply(r, "kernel_info_reply", k.info())
	case "comm_info_request":
		k.reply(r, "comm_info_reply", map[string]any{"status": "ok", "comms": map[string]any{}})
	case "is_complete_request":
		k.reply(r, "is_complete_reply", map[string]any{"status": "unknown"})
	case "complete_request":
		var c struct {
			CursorPos int `json:"cursor_pos"`
		}
		_ = json.Unmarshal(r.m.Content, &c)
		k.reply(r, "complete_reply", map[string]any{"status": "ok", "matches": []string{}, "cursor_start": c.CursorPos,
			"cursor_end": c.CursorPos, "metadata": map[string]any{}})
	case "inspect_request":
		k.reply(r, "inspect_reply", map[string]any{"status": "ok", "found": false, "data": map[string]any{}, "metadata": map[string]any{}})
	case "history_request":
		k.reply(r, "history_reply", map[string]any{"status": "ok", "history": []any{}})
	default:
		reply := strings.TrimSuffix(t, "_request") + "_reply"
		k.reply(r, reply, map[string]any{"status": "error", "ename": "NotImplementedError",
			"evalue": fmt.Sprintf("terp's kernels do not answer %s", t), "traceback": []string{}})
	}
}

func (k *hub) setBusy(busy bool, cancel context.CancelFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.busy, k.cancel = busy, cancel
}

// info is kernel_info_reply's content.
func (k *hub) info() map[string]any {
	return map[string]any{
		"status": "ok", "protocol_version": protocolVersion, "implementation": "terp", "implementation_version": k.a.terpVersion,
		"language_info": map[string]any{"name": "python", "version": "3", "mimetype": "text/x-python", "file_extension": ".py",
			"pygments_lexer": "ipython3", "codemirror_mode": map[string]any{"name": "ipython", "version": 3}, "nbconvert_exporter": "python"},
		"banner":     "Python in a terp sandbox: /mnt/data is the kernel's files; no network unless the server allows it.",
		"help_links": []any{}, "debugger": false,
	}
}

// executeRequest is the part of an execute_request's content terp reads.
type executeRequest struct {
	Code   string `json:"code"`
	Silent bool   `json:"silent"`
}

// execute runs an execute_request's code through the host's exec path and
// tells what it did as Jupyter's kernels do: execute_input, the output as
// it is printed, a display_data for each figure, the value as
// execute_result, an error, and the execute_reply.
func (k *hub) execute(r request) {
	var req executeRequest
	if err := json.Unmarshal(r.m.Content, &req); err != nil {
		k.fail(r, 0, "ValueError", "the execute_request's content is not JSON: "+err.Error(), nil)
		return
	}
	// A client that goes away does not stop the code, as with Jupyter's
	// kernels: an interrupt, a restart or a shutdown does.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.on.ctx))
	defer cancel()
	l, err := k.a.host.Acquire(ctx, k.owner, k.id)
	if err == nil && l == nil {
		err = &serve.NotFoundError{Kind: "kernel", ID: k.id}
	}
	if err != nil {
		k.fail(r, 0, "KernelGone", fmt.Sprintf("this kernel cannot run code: %v", err), nil)
		return
	}
	defer l.Release(context.WithoutCancel(ctx))
	k.setBusy(true, cancel)
	k.mu.Lock()
	next := k.cell + 1
	k.mu.Unlock()
	k.iopub(r, "execute_input", map[string]any{"code": req.Code, "execution_count": next})
	out := map[string]*utf8Carry{kernel.Stdout: {}, kernel.Stderr: {}}
	send := func(o kernel.Output) {
		if text := out[o.Stream].text(o.Text); text != "" && !req.Silent {
			k.iopub(r, "stream", map[string]string{"name": o.Stream, "text": text})
		}
	}
	res, err := k.a.host.Exec(ctx, l, req.Code, send)
	for _, name := range []string{kernel.Stdout, kernel.Stderr} {
		if text := out[name].rest(); text != "" && !req.Silent {
			k.iopub(r, "stream", map[string]string{"name": name, "text": text})
		}
	}
	count := res.Cell
	k.mu.Lock()
	k.cell = count
	k.mu.Unlock()
	for _, f := range res.Figures {
		k.iopub(r, "display_data", k.figure(context.WithoutCancel(ctx), l, f))
	}
	switch e := res.Exception; {
	case err != nil && !errors.Is(err, context.Canceled):
		k.fail(r, count, "TerpError", err.Error(), nil)
	case res.Outcome == kernel.OutcomeTimedOut:
		k.fail(r, count, "TimeoutError", strings.TrimSpace("the code ran past terp's limit per execution and was interrupted. "+res.Notice), tracebackOf(e))
	case res.Outcome == kernel.OutcomeRestarted:
		k.fail(r, count, "KernelRestarted", strings.TrimSpace(res.Notice), tracebackOf(e))
	case e != nil:
		k.fail(r, count, e.Name, e.Value, e.Traceback)
	case res.Outcome == kernel.OutcomeInterrupted:
		k.fail(r, count, "KeyboardInterrupt", "", nil)
	default:
		if res.Value != "" && !req.Silent {
			k.iopub(r, "execute_result", map[string]any{"execution_count": count, "data": map[string]string{"text/plain": res.Value},
				"metadata": map[string]any{}})
		}
		k.reply(r, "execute_reply", map[string]any{"status": "ok", "execution_count": count, "user_expressions": map[string]any{}, "payload": []any{}})
	}
}

func tracebackOf(e *kernel.Exception) []string {
	if e == nil {
		return nil
	}
	return e.Traceback
}

// fail tells an execution's error on iopub and in its execute_reply.
func (k *hub) fail(r request, count int, ename, evalue string, traceback []string) {
	if traceback == nil {
		traceback = []string{strings.TrimSuffix(ename+": "+evalue, ": ")}
	}
	k.iopub(r, "error", map[string]any{"ename": ename, "evalue": evalue, "traceback": traceback})
	k.reply(r, "execute_reply", map[string]any{"status": "error", "execution_count": count, "ename": ename, "evalue": evalue,
		"traceback": traceback, "user_expressions": map[string]any{}, "payload": []any{}})
}

// figure is the display_data content of the image file f (relative to
// /work): the image, base64 on one line, and a line of text naming it.
func (k *hub) figure(ctx context.Context, l *serve.Lease, f string) map[string]any {
	text := fmt.Sprintf("<image /mnt/data/%s>", f)
	data := map[string]string{"text/plain": text}
	mime := map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}[strings.ToLower(path.Ext(f))]
	if rc, err := l.Container().Conversation().ReadFile(ctx, f); err == nil {
		b, err := io.ReadAll(io.LimitReader(rc, maxFigure+1))
		_ = rc.Close()
		if err == nil && len(b) <= maxFigure && mime != "" {
			data[mime] = base64.StdEncoding.EncodeToString(b)
		}
	}
	return map[string]any{"data": data, "metadata": map[string]any{}, "transient": map[string]any{}}
}

// status tells every connection the kernel's state, parented to r.
func (k *hub) status(r request, state string) {
	k.iopub(r, "status", map[string]string{"execution_state": state})
}

// iopub sends a message parented to r to every connection, as the iopub
// channel broadcasts.
func (k *hub) iopub(r request, msgType string, content any) {
	k.broadcast(r.m.rawHeader(), msgType, content)
}

func (k *hub) broadcast(parent json.RawMessage, msgType string, content any) {
	m := k.message("iopub", parent, msgType, content)
	for _, c := range k.connList() {
		c.send(m)
	}
}

// connList is the connections as they are now, to write to without the
// hub's lock.
func (k *hub) connList() []*conn {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Collect(maps.Keys(k.conns))
}

// reply answers r on its own channel, to its connection only.
func (k *hub) reply(r request, msgType string, content any) {
	r.on.send(k.message(r.m.Channel, r.m.rawHeader(), msgType, content))
}

func (k *hub) message(channel string, parent json.RawMessage, msgType string, content any) message {
	b, err := json.Marshal(content)
	if err != nil {
		b = []byte("{}")
	}
	return message{Channel: channel, ParentHeader: parent, Metadata: json.RawMessage("{}"), Content: b,
		Header: header{MsgID: newUUID(), MsgType: msgType, Username: "terp", Session: k.session, Date: now(), Version: protocolVersion}}
}

// rawHeader is m's header as JSON, a reply's parent header.
func (m message) rawHeader() json.RawMessage {
	b, _ := json.Marshal(m.Header)
	return b
}

// utf8Carry joins the pieces of a stream that may end inside a UTF-8
// character, which the next piece completes: a message's text is always
// whole characters.
type utf8Carry struct{ held []byte }

func (u *utf8Carry) text(piece string) string {
	b := append(u.held, piece...)
	cut := len(b)
	// A character's start is at most 3 bytes back from the end.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	u.held = append([]byte(nil), b[cut:]...)
	return string(b[:cut])
}

// rest is what is held at the stream's end, as it is.
func (u *utf8Carry) rest() string {
	s := string(u.held)
	u.held = nil
	return s
}
