package serve

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/store"
)

// Route is one endpoint a protocol serves, with what the host must know of
// it before its handler runs.
type Route struct {
	// Pattern is a net/http.ServeMux pattern, such as "POST /v1/files".
	Pattern string
	Handler http.HandlerFunc
	// Public routes answer without a key: probes and scrapers send none.
	Public bool
	// Upload routes take a file as multipart/form-data: such a body is
	// bounded by Caps.Upload rather than Caps.Request.
	Upload bool
}

// Protocol is a wire protocol terp serve speaks (OpenAI's API, Jupyter's
// kernel API, LibreChat's code API): its routes, where its clients send
// their key, and how it says no. The host authenticates, limits, logs and
// counts every route's requests the same way, whatever the protocol.
type Protocol struct {
	// Name labels the protocol's requests in the logs.
	Name   string
	Routes []Route
	// Credential finds a request's key; nil means Bearer.
	Credential Credential
	// Identify, when set, is asked first: a protocol whose clients may
	// prove who they are otherwise than with a key (LibreChat's signed
	// tokens) names the principal itself. "" and no error means the
	// request carries no such proof, and its key is looked for instead;
	// an error refuses the request (Refuse gets it), and so does a name
	// the key ring does not hold.
	Identify func(r *http.Request) (name string, err error)
	// KeyIn says where the protocol's clients send their key, for the
	// message of a request without one; "" means Bearer's header.
	KeyIn string
	// Refuse answers a request the host turns away before its handler
	// runs, in the protocol's words: err is an *UnauthorizedError, or a
	// refusal for a limit (a rate, a size, a body too slow), or any other
	// error the host ended a request with (see Server.Refuse); nil means
	// a JSON {"error": message} with the status StatusOf gives.
	Refuse func(w http.ResponseWriter, err error)
}

// UnauthorizedError is a request without a key the server accepts.
type UnauthorizedError struct {
	// Where says where the protocol's clients send their key, for the
	// message.
	Where string
	// Named is the principal a protocol identified the request as
	// (Protocol.Identify) that the key ring does not hold; "" for a
	// request without a key, or with a wrong one.
	Named string
}

func (e *UnauthorizedError) Error() string {
	if e.Named != "" {
		return fmt.Sprintf("The request names %q, which is no key's name in this server's --keys-file: add a key of that name, or map the name to one.", e.Named)
	}
	return fmt.Sprintf("Incorrect API key provided: send one of the server's keys as %s (terp serve --keys-file or TERP_SERVE_KEY).", e.Where)
}

// route is a registered route with its protocol.
type route struct {
	Route
	proto *Protocol
}

// upload reports whether r uploads a file to rt: multipart, to a route
// that takes files.
func (rt *route) upload(r *http.Request) bool {
	return rt.Upload && r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/")
}

// Register serves p's routes; call it before the server serves a request.
// Registering a pattern twice panics, as
// http.ServeMux does: it is a programming error.
func (s *Server) Register(p Protocol) {
	if p.Credential == nil {
		p.Credential = Bearer
	}
	if p.Refuse == nil {
		p.Refuse = refusePlainly
	}
	if p.KeyIn == "" {
		p.KeyIn = "Authorization: Bearer KEY"
	}
	for _, rt := range p.Routes {
		if _, dup := s.routeOf[rt.Pattern]; dup {
			panic("serve: route registered twice: " + rt.Pattern)
		}
		s.routeOf[rt.Pattern] = &route{Route: rt, proto: &p}
		s.mux.HandleFunc(rt.Pattern, rt.Handler)
	}
}

// lookupRoute is the registered route r goes to, and its pattern; nil for
// a request no route takes.
func (s *Server) lookupRoute(r *http.Request) (*route, string) {
	_, pattern := s.mux.Handler(r)
	return s.routeOf[pattern], pattern
}

// StatusOf is the HTTP status of an error the host ends a request with:
// a refusal's own, 401 without a key, 404 for what is not there, 409 for a
// busy container, 503 when the server stopped or a replica is gone; 500
// for anything else, a failure of terp's.
func StatusOf(err error) int {
	var unauthorized *UnauthorizedError
	var missing *NotFoundError
	var stopped *StoppedError
	var unavailable *UnavailableError
	switch {
	case AsRefusal(err) != nil:
		return AsRefusal(err).Status
	case errors.As(err, &unauthorized):
		return http.StatusUnauthorized
	case errors.As(err, &missing):
		return http.StatusNotFound
	case errors.Is(err, conversation.ErrBusy), errors.Is(err, store.ErrBusy):
		return http.StatusConflict
	case errors.As(err, &stopped), errors.As(err, &unavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// refusePlainly is the refusal of a protocol that gives none of its own.
func refusePlainly(w http.ResponseWriter, err error) {
	status, msg := StatusOf(err), err.Error()
	if status == http.StatusInternalServerError {
		msg = Internal(w, err)
	}
	WriteJSON(w, status, map[string]string{"error": msg})
}
