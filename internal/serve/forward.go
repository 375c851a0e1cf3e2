package serve

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// CountedHeader carries, on a request one replica forwards to another,
// the forwarding replica's word that it counted the request under its
// key's limits (admit), so that the replica it reaches does not count it
// again. It is "UNIX.MAC": when it was made, and an HMAC of that and the
// key's name under the replicas' shared secret (State.Secret), which a
// client cannot make; it is good for markLifetime, so that one seen by
// someone else does not serve them for long. A request without it, or with
// one that does not verify, is counted as any other.
const CountedHeader = "X-Terp-Counted"

// markLifetime is how long a CountedHeader is good for: a forward takes
// far less, and replicas' clocks may disagree by a little.
const markLifetime = time.Minute

// countedMark is the CountedHeader of a request of owner's under secret,
// made at now.
func countedMark(secret []byte, owner string, now time.Time) string {
	return fmt.Sprintf("%d.%s", now.Unix(), markMAC(secret, owner, now.Unix()))
}

func markMAC(secret []byte, owner string, unix int64) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "terp counted\x00%s\x00%d", owner, unix)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validMark reports whether mark is a CountedHeader made under secret for
// owner, and good at now.
func validMark(secret []byte, owner, mark string, now time.Time) bool {
	at, mac, ok := strings.Cut(mark, ".")
	unix, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || now.Sub(time.Unix(unix, 0)).Abs() > markLifetime {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(markMAC(secret, owner, unix)))
}

// counted reports whether r, a request of owner's, was forwarded by a
// replica that counted it already.
func (s *Server) counted(r *http.Request, owner string) bool {
	mark := r.Header.Get(CountedHeader)
	if mark == "" || r.Header.Get(ForwardedHeader) == "" {
		return false
	}
	secret, err := s.replicaSecret(r.Context())
	if err != nil {
		s.cfg.Log.Warn("checking a forwarded request", "error", err)
		return false
	}
	return validMark(secret, owner, mark, time.Now())
}

// replicaSecret is the state's Secret, read once.
func (s *Server) replicaSecret(ctx context.Context) ([]byte, error) {
	s.secretMu.Lock()
	defer s.secretMu.Unlock()
	if s.secret == nil {
		secret, err := s.state.Secret(ctx)
		if err != nil {
			return nil, err
		}
		s.secret = secret
	}
	return s.secret, nil
}

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
	// This replica admitted the request, and counted it: the replica it
	// goes to must not count it again.
	var mark string
	if secret, err := s.replicaSecret(r.Context()); err != nil {
		s.cfg.Log.Warn("forwarding to replica: the request will count twice", "container", rec.ID, "error", err)
	} else {
		mark = countedMark(secret, Owner(r), time.Now())
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The client's Host, which the links in the answer start
			// with (BaseURL), not the replica's own address.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(ForwardedHeader, s.replicaName())
			pr.Out.Header.Del(CountedHeader)
			if mark != "" {
				pr.Out.Header.Set(CountedHeader, mark)
			}
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
