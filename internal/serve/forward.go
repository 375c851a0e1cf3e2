package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"

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

// forwarded forwards r to the replica err names, if err is an
// elsewhereError, and reports whether it did (and so answered).
func (s *Server) forwarded(w http.ResponseWriter, r *http.Request, err error) bool {
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
// again (a JSON body can; an upload cannot, and is answered 503, to be
// sent again).
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rec state.Container) {
	target, err := url.Parse(rec.Replica)
	if err != nil || target.Scheme == "" || target.Host == "" {
		serverError(w, fmt.Errorf("container %s is open in a replica whose address %q is not a URL", rec.ID, rec.Replica))
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(ForwardedHeader, s.replicaName())
		},
		Transport:     s.cfg.Upstream.Transport,
		FlushInterval: -1, // streams pass as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.cfg.Log.Warn("forwarding to replica", "container", rec.ID, "replica", rec.Replica, "error", err)
			s.forget(r.Context(), rec)
			if r.GetBody == nil && r.Body != nil && r.Body != http.NoBody {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, "server_error", "replica_unavailable",
					fmt.Sprintf("the terp serve replica container %s was open in does not answer; send the request again", rec.ID), "")
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
