package jupyter

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"net/http"

	"github.com/coder/websocket"

	"github.com/terpdev/terp/internal/serve"
)

// maxMessage bounds a message a client sends on a kernel's channels: an
// execute_request's code, mostly.
const maxMessage = 16 << 20

// writeTimeout bounds how long a message waits for a client that does not
// read: past it, the connection is closed rather than holding the kernel.
const writeTimeout = time.Minute

// conn is one websocket connection to a kernel.
type conn struct {
	ws *websocket.Conn
	v1 bool // the binary v1 format; else legacy JSON
	// ctx ends with the connection.
	ctx context.Context

	mu sync.Mutex // one writer at a time
}

// channels serves a kernel's websocket: the client's messages in, the
// kernel's out, on the legacy JSON format or the v1 binary one when the
// client offers it (JupyterLab does).
func (a *api) channels(w http.ResponseWriter, r *http.Request) {
	a.withKernel(w, r, func(l *serve.Lease) {
		opts := &websocket.AcceptOptions{
			// The key is in the URL or a header, never a cookie, so a
			// page of another origin cannot use a browser's: any origin
			// may connect, as with a token-authenticated Jupyter Server.
			InsecureSkipVerify: true,
		}
		if slices.Contains(websocketProtocols(r), subprotocolV1) {
			opts.Subprotocols = []string{subprotocolV1}
		}
		ws, err := websocket.Accept(w, r, opts)
		if err != nil {
			return // Accept answered the request
		}
		ws.SetReadLimit(maxMessage)
		// The connection outlives the request's context once hijacked.
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		c := &conn{ws: ws, v1: ws.Subprotocol() == subprotocolV1, ctx: ctx}
		k := a.kernel(l.Container())
		k.attach(c)
		defer k.detach(c)
		for {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				c.close("")
				return
			}
			var m message
			if c.v1 || typ == websocket.MessageBinary {
				m, err = decodeV1(b)
			} else {
				m, err = decodeLegacy(b)
			}
			if err != nil {
				c.close(err.Error())
				return
			}
			a.dispatch(k, request{m: m, on: c})
		}
	})
}

// dispatch routes one message: control requests are answered at once (an
// interrupt must not wait for the execution it interrupts), shell requests
// go in the kernel's queue, and stdin's are dropped (terp's kernels never
// ask for input).
func (a *api) dispatch(k *hub, r request) {
	switch r.m.Channel {
	case "control":
		switch r.m.Header.MsgType {
		case "interrupt_request":
			k.interrupt()
			k.reply(r, "interrupt_reply", map[string]string{"status": "ok"})
		case "shutdown_request":
			var req struct {
				Restart bool `json:"restart"`
			}
			_ = decodeContent(r.m, &req)
			k.reply(r, "shutdown_reply", map[string]any{"status": "ok", "restart": req.Restart})
			if req.Restart {
				a.restartLater(k)
			} else {
				k.shutdown()
			}
		case "kernel_info_request":
			k.reply(r, "kernel_info_reply", k.info())
		default:
			k.reply(r, "error", map[string]any{"status": "error", "ename": "NotImplementedError",
				"evalue": "terp's kernels do not answer " + r.m.Header.MsgType + " on the control channel", "traceback": []string{}})
		}
	case "shell":
		k.submit(r)
	}
}

// restartLater restarts k in the background, as a shutdown_request with
// restart asks: the reply has been sent.
func (a *api) restartLater(k *hub) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := a.host.Acquire(ctx, k.owner, k.id)
		if err != nil || l == nil {
			return
		}
		defer l.Release(ctx)
		_ = k.restart(ctx, l)
	}()
}

// send writes m to the connection; a client that does not read within
// writeTimeout is dropped.
func (c *conn) send(m message) {
	var b []byte
	var err error
	typ := websocket.MessageText
	if c.v1 {
		b, err = encodeV1(m)
		typ = websocket.MessageBinary
	} else {
		b, err = encodeLegacy(m)
	}
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, typ, b); err != nil && !errors.Is(err, context.Canceled) {
		go c.close("")
	}
}

// close ends the connection, saying why when there is a reason.
func (c *conn) close(why string) {
	if why == "" {
		_ = c.ws.CloseNow()
		return
	}
	_ = c.ws.Close(websocket.StatusPolicyViolation, truncate(why, 120))
}

// websocketProtocols are the subprotocols the client offers.
func websocketProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		out = append(out, splitComma(h)...)
	}
	return out
}
