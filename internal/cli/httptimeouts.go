package cli

import (
	"io"
	"net/http"
	"time"
)

// httpTimeouts bound how slowly a client may send, so that clients that
// trickle their headers or bodies, or keep connections open doing nothing,
// cannot hold all of a server's connections (slowloris). Nothing bounds how
// long an answer takes: a streamed response runs for as long as its turn,
// minutes, so the servers have no WriteTimeout. Nor a ReadTimeout: one
// total for every body would cut a large upload on a slow link short, or
// let a trickle run as long; the body's deadline moves as it arrives
// instead.
type httpTimeouts struct {
	// header bounds the request line and headers.
	header time.Duration
	// body bounds the request body: it may take this long, plus a second
	// for each minBodyRate bytes it has sent.
	body time.Duration
	// idle bounds a kept-alive connection's wait for its next request.
	idle time.Duration
}

var defaultHTTPTimeouts = httpTimeouts{header: 10 * time.Second, body: 30 * time.Second, idle: 2 * time.Minute}

// minBodyRate is the slowest a body may come once its timeout has passed:
// 32 KiB a second (256 kbit/s), so that a large upload on a slow link gets
// the time it needs and a trickle does not.
const minBodyRate = 32 << 10

// server is an http.Server for h with the timeouts.
func (t httpTimeouts) server(h http.Handler) *http.Server {
	return &http.Server{Handler: bodyDeadline(h, t.body), ReadHeaderTimeout: t.header, IdleTimeout: t.idle}
}

// bodyDeadline makes each request's body arrive within grace, plus a
// second per minBodyRate bytes received; a read past that fails with
// os.ErrDeadlineExceeded, and the handler answers (or not) as it does for
// any broken body. The deadline goes once the body has been read: net/http
// lifts it when it starts reading the connection in the background, to
// notice a client that goes away during the answer.
//
// The handler gets a copy of the request with the body wrapped: net/http
// looks at the Body of its own to decide, after an answer that left the
// body unread, whether to read the rest or close the connection, and a
// body it does not know it reads, up to the deadline.
func bodyDeadline(h http.Handler, grace time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), grace: grace}
			if b.extend() == nil {
				r = r.WithContext(r.Context())
				r.Body = b
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody moves the connection's read deadline as its body arrives.
// It sets none once the body has ended: a deadline set on net/http's
// background read would end it, and with it the request's context, in the
// middle of a stream. A body never read to its end keeps its deadline,
// which bounds the read net/http makes to discard the rest.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	n     int64
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if n > 0 && err == nil {
		_ = b.extend()
	}
	return n, err
}

func (b *deadlineBody) extend() error {
	return b.rc.SetReadDeadline(b.start.Add(b.grace + time.Duration(b.n)*time.Second/minBodyRate))
}
