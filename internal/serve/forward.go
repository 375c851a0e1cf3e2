package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"

	"github.com/terpdev/terp/internal/serve/state"
)

// Replicas: several terp serve processes share one state and one
// conversation store (PostgreSQL) behind a load balancer. A container is
// open in one replica at a time, which holds its conversation's lock and
// runs its kernel; its record names that replica (Config.Replica, the
// address the others reach it at). A request for it that reaches another
// replica is forwarded there, streams included, so the kernel keeps its
// variables whichever replica the client reached. When that replica does
// not answer (it died), the record is cleared and the container is opened
// where the request is: with remote sandboxes (cpuos, Docker on another
// host) its files and history go on, and Python restarts.

// ForwardedHeader marks a request one replica forwarded to another, which
// never forwards it again.
const ForwardedHeader = "X-Terp-Forwarded"

// elsewhereError is what container returns for a container open in
// another replica.
type elsewhereError struct {
	rec state.Container
}

func (e *elsewhereError) Error() string {
	return fmt.Sprintf("container %s is open in the replica at %s", e.rec.ID, e.rec.Replica)
}

// elsewhere reports whether rec's container is open in another replica
// that the request of ctx may be forwarded to: not one forwarded already.
func (s *Server) elsewhere(ctx context.Context, rec state.Container) bool {
	fwd, _ := ctx.Value(forwardedKey{}).(bool)
	return rec.Replica != "" && rec.Replica != s.cfg.Replica && !fwd
}

type forwardedKey struct{}

// Forwarded forwards r to the replica err names, if err is an
// elsewhereError, and reports whether it did (and so answered).
func (s *Server) Forwarded(w http.ResponseWriter, r *http.Request, err error) bool {
	var e *elsewhereError
	if !errors.As(err, &e) {
		return false
	}
	s.forward(w, r, e.rec)
	return true
}

// forward sends r on to the replica rec's container is open in, and its
// answer back as it comes. A replica that does not answer is forgotten as
// the container's: the request is then run here, if its body can be read
// again (any but an upload's can, see replayable; an upload is answered
// 503, to be sent again).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rec state.Container) {
	target, err := url.Parse(rec.Replica)
	if err != nil || target.Scheme == "" || target.Host == "" {
		s.Refuse(w, r, fmt.Errorf("container %s is open in a replica whose address %q is not a URL", rec.ID, rec.Replica))
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(ForwardedHeader, s.replicaName())
		},
		Transport:     s.cfg.Upstream.Transport,
		FlushInterval: -1, // streams pass as they come
		// Only a replica that did not answer is forgotten: an answer,
		// errors too, passes on as it is, and a client that left, or
		// whose body was refused, says nothing of the replica.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // nobody to answer
			}
			if refusal := AsRefusal(err); refusal != nil {
				s.Refuse(w, r, refusal)
				return
			}
			s.cfg.Log.Warn("forwarding to replica", "container", rec.ID, "replica", rec.Replica, "error", err)
			s.forget(r.Context(), rec)
			if r.GetBody == nil && r.Body != nil && r.Body != http.NoBody {
				s.Refuse(w, r, &UnavailableError{ContainerID: rec.ID})
				return
			}
			again := r.Clone(r.Context())
			if r.GetBody != nil {
				again.Body, _ = r.GetBody()
			}
			again.Header.Set(ForwardedHeader, s.replicaName())
			s.mux.ServeHTTP(w, again)
		},
	}
	if r.GetBody != nil {
		r.Body, _ = r.GetBody()
	}
	proxy.ServeHTTP(w, r)
}

// forget clears the replica of rec's container, unless it changed since:
// the replica it named is gone, and the container may be opened anywhere.
func (s *Server) forget(ctx context.Context, rec state.Container) {
	now, err := s.state.Container(ctx, rec.Owner, rec.ID)
	if err != nil || now.Replica != rec.Replica {
		return
	}
	now.Replica = ""
	if err := s.state.SaveContainer(context.WithoutCancel(ctx), now); err != nil {
		s.cfg.Log.Warn("forgetting a replica", "container", rec.ID, "error", err)
	}
}

// replicaName is this replica's address, or "self" for a server without
// one, for the header that says a request was forwarded.
func (s *Server) replicaName() string {
	if s.cfg.Replica != "" {
		return s.cfg.Replica
	}
	return "self"
}

// replayable makes r's body readable again from its start, through
// GetBody, however much a handler read of it: what was read is kept, then
// the rest comes as it is read. The forwarder owns this, so that a handler
// may read its body any way it likes and still have the request forwarded
// whole to the replica its container is open in, or run here when that
// replica is gone. The body is already bounded (admit, Caps.Request), and
// so is what is kept. An upload is left as it is, unkept: its forward to a
// replica that does not answer is refused, to be sent again.
func (s *Server) replayable(r *http.Request, rt *route) {
	if rt.upload(r) || r.Body == nil || r.Body == http.NoBody {
		return
	}
	b := &replayBody{src: r.Body}
	r.Body = &replayReader{b: b}
	r.GetBody = func() (io.ReadCloser, error) { return &replayReader{b: b}, nil }
}

// replayBody is a request body with what was read of it so far. Its
// readers may be in different goroutines: a proxy's transport sends the
// body while the handler that started it waits.
type replayBody struct {
	mu   sync.Mutex
	src  io.Reader
	kept []byte
	err  error // src's, once it failed or ended
}

// replayReader reads a replayBody from its start.
type replayReader struct {
	b   *replayBody
	off int
}

func (r *replayReader) Read(p []byte) (int, error) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.off == len(b.kept) && b.err == nil && len(p) > 0 {
		end := len(b.kept)
		b.kept = slices.Grow(b.kept, len(p))
		n, err := b.src.Read(b.kept[end : end+len(p)])
		b.kept, b.err = b.kept[:end+n], err
	}
	if r.off < len(b.kept) {
		n := copy(p, b.kept[r.off:])
		r.off += n
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return 0, nil
}

// Close leaves the body to net/http, which closes it when the request is
// done: a reader the proxy's transport closes must not end the others.
func (r *replayReader) Close() error { return nil }
