package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// workerScript is where package kernel writes its Python worker, which the
// stand-in runs as standInWorker.
var workerScript = path.Join(sandbox.WorkDir, ".terp", "worker.py")

// standInWorker speaks the kernel's worker protocol (kernel/protocol.go), in
// place of worker.py, running each request's code in the stand-in's line
// language: a ready frame carrying the nonce of the command line (and a
// warm frame, with --prewarm), then for each JSON request line its output
// as out and err frames and a done frame, which reports the exception a
// line the stand-in cannot read (a SyntaxError) or cannot do (an OSError)
// raised, as worker.py reports Python's.
// It serves both modes alike (the line language has no variables to keep),
// and a signal ends it, as any program here.
func standInWorker(ctx context.Context, c *Cmd) int {
	nonce, prewarm := "", false
	for i, a := range c.Args {
		if a == "--nonce" && i+1 < len(c.Args) {
			nonce = c.Args[i+1]
		}
		prewarm = prewarm || a == "--prewarm"
	}
	if err := writeFrame(c.Stdout, nonce, "ready", mustJSON(map[string]any{"python": "stand-in", "pid": 1})); err != nil {
		return 1
	}
	// The stand-in imports nothing: its prewarm is over at once.
	if prewarm {
		if err := writeFrame(c.Stdout, nonce, "warm", []byte("{}")); err != nil {
			return 1
		}
	}
	requests := bufio.NewReader(c.Stdin)
	for cell := 1; ; cell++ {
		line, err := requests.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var req struct{ Nonce, Code string }
		if err := json.Unmarshal(line, &req); err != nil {
			fmt.Fprintf(c.Stderr, "terp worker: bad request: %v\n", err)
			return 2
		}
		started := time.Now()
		run := *c
		run.Stdout = &frameWriter{w: c.Stdout, nonce: req.Nonce, kind: "out"}
		run.Stderr = &frameWriter{w: c.Stdout, nonce: req.Nonce, kind: "err"}
		exit, exception := runStandIn(ctx, &run, path.Join(sandbox.WorkDir, ".terp", "main.py"), req.Code)
		done := mustJSON(map[string]any{"exit_code": exit, "interrupted": false, "figures": []string{},
			"value": nil, "exception": exception, "cell": cell, "seconds": time.Since(started).Seconds()})
		if err := writeFrame(c.Stdout, req.Nonce, "done", done); err != nil {
			return 1
		}
	}
}

// frameWriter sends what is written to it as out or err frames of one run,
// in chunks no larger than the protocol allows.
type frameWriter struct {
	w           io.Writer
	nonce, kind string
}

func (f *frameWriter) Write(p []byte) (int, error) {
	const maxChunk = 64 << 10
	for off := 0; off < len(p); off += maxChunk {
		if err := writeFrame(f.w, f.nonce, f.kind, p[off:min(off+maxChunk, len(p))]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func writeFrame(w io.Writer, nonce, kind string, payload []byte) error {
	_, err := fmt.Fprintf(w, "TERP %s %s %d\n%s", nonce, kind, len(payload), payload)
	return err
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
