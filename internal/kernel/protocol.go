package kernel

import (
	"crypto/rand"
	"encoding/hex"
)

// The protocol between terp and the worker (worker.py).
//
// terp starts `python3 /work/.terp/worker.py --nonce <hex> --prewarm a,b,c`
// (or `--fresh` in place of --prewarm: script mode, a forked child per run)
// with pipes on the worker's stdin, stdout and stderr. The worker moves all
// three to private descriptors at once and points fd 0, 1 and 2 at
// /dev/null, so the code it runs can neither read requests nor print into
// the channel; its own stdout and stderr are pipes the worker reads (kept for
// the worker's life in kernel mode, made for each run in script mode).
//
// Requests, terp to worker, are JSON lines on the worker's stdin, one per
// run, sent only after the ready frame and after the previous run's done:
//
//	{"nonce": "<32 hex digits, new for every run>", "code": "<python source>"}
//
// The code is a notebook cell: Python, or Python with IPython's syntax
// (`!cmd`, `%magic`), which the worker's notebook layer makes Python when
// the cell does not compile as it is.
//
// Responses, worker to terp, are frames on the worker's stdout: a header
// line, then exactly n raw bytes (no newline after them):
//
//	TERP <nonce> <kind> <n>\n<n bytes>
//
// The nonce is 1 to 64 lowercase hex digits and n a decimal without sign or
// leading zeros. The kinds:
//
//   - ready: JSON (readyMsg), sent once the interpreter has started (the
//     prewarm imports go on in a thread of their own), with the nonce from
//     the command line. Until it arrives the worker reads no request.
//   - out, err: a raw chunk, at most maxChunk bytes, of what the run wrote
//     to fd 1 or fd 2, in order per stream, forwarded as it arrives.
//   - done: JSON (doneMsg), the last frame of a run, sent after every out
//     and err frame of the run.
//   - warm: JSON ({}), sent once, with ready's nonce, when the prewarm
//     imports (or script mode's preload) are over: between runs or during
//     one, after ready. A worker started without them sends none.
//
// Frames of a run carry its request's nonce, and no frame with that nonce
// follows the run's done: the worker drops what a reader thread stuck on a
// descriptor the code duplicated forwards after the run's end. The nonce is
// not a secret from the code (it lives in the worker's memory); it ties a
// frame to a run. What keeps printed text out of the channel is the
// descriptors: anything the code writes to fd 1 or 2 is payload inside out
// and err frames, whatever it looks like. Only the worker answers: a child
// the code forks is cut off the channel (see worker.py).
//
// terp reads frames strictly: a header that is not exactly this shape, an
// unknown kind, a payload over its kind's cap, a frame that belongs to no
// run in progress (another nonce, after the run's done, a second ready), a
// stream that ends inside a frame, or one that stops inside a frame for
// frameStall is a protocol error. Such a frame can only come from the code
// writing into the channel, and honouring it would let its payload swallow
// the worker's real frames, so that the run ended as a false timeout. The
// worker is then killed and replaced, as after a crash, and the notice says
// the channel broke; nothing it sends can make terp buffer more than a
// frame's cap or wait without a bound.
//
// The worker's stderr carries its diagnostics and, if the interpreter
// crashes, faulthandler's report, which terp adds to the run's stderr.

// Frame kinds.
const (
	kindReady = "ready"
	kindOut   = "out"
	kindErr   = "err"
	kindDone  = "done"
	kindWarm  = "warm"
)

// Frame size caps. Output chunks are what the worker reads from a pipe at
// once; control messages are small JSON documents.
const (
	maxChunk   = 64 << 10
	maxControl = 1 << 20
	// maxHeader bounds a header line: "TERP ", a 64 digit nonce, a kind and
	// a length fit easily.
	maxHeader = 128
)

// request is one run, as sent to the worker.
type request struct {
	Nonce string `json:"nonce"`
	Code  string `json:"code"`
}

// readyMsg is the ready frame's payload.
type readyMsg struct {
	Python string `json:"python"`
	PID    int    `json:"pid"`
}

// doneMsg is the done frame's payload.
type doneMsg struct {
	ExitCode int `json:"exit_code"`
	// Interrupted says a SIGINT reached the run while its code ran.
	Interrupted bool `json:"interrupted"`
	// Figures are the files (relative to /work) the run's open matplotlib
	// figures were saved as, by plt.show() or after the run, and the images
	// display() saved.
	Figures []string `json:"figures"`
	// Value is what the cell's last expression showed (its repr, or what
	// display() shows of it), as printed at the end of its stdout; nil when
	// it had none (or it was None).
	Value *string `json:"value"`
	// Exception is the exception that ended the run's code, null when none
	// did (see Exception): its type's name, its value (str) and the
	// traceback the code's stderr shows, as lines, without terp's frames;
	// for a SyntaxError the formatted error lines alone, for the notebook
	// layer's UsageError and a SystemExit with a nonzero status none. The
	// traceback is also printed on the run's stderr, as before, since the
	// model reads that. It is cut to fit: each line and the value at 20,000
	// characters, the traceback at 16 Ki characters, head and tail.
	//
	// In fresh mode the forked child reports it (and the images display()
	// saved, which are then in Figures) as it ends, as a JSON document on a
	// pipe of its own that the worker reads while the child runs; it is
	// null when the child was killed by a signal or left no report.
	Exception *Exception `json:"exception"`
	// Signal is the signal that ended a fresh-mode run's process, 0 if it
	// exited (ExitCode is then 128+Signal, as a shell gives it).
	Signal int `json:"signal"`
	// Cell is the run's number in the worker's life, from 1: the <cell N>
	// its tracebacks name.
	Cell    int     `json:"cell"`
	Seconds float64 `json:"seconds"`
}

// newNonce returns 128 random bits in hex, for a run or a worker's ready
// frame.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}
