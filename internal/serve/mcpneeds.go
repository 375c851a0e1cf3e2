package serve

import "context"

// What terp mcp, a protocol whose library (the MCP Go SDK) reads requests
// and runs calls itself, needs of the host beyond the seams every protocol
// uses.

// Caps are the server's caps, the defaults filled in: a library that
// bounds what it reads itself is told the host's bound, so that both say
// the same.
func (s *Server) Caps() Caps { return s.lim.caps }

// WithRequestID is ctx with id as its request's, for the log lines of work
// that runs in a context other than its request's: the calls of an MCP
// session run in the context of the request that opened the session, but
// each comes in a request of its own, whose id Handler sets in its
// RequestIDHeader. "" leaves ctx as it is.
func WithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	info := &requestInfo{id: id}
	if old := infoOf(ctx); old != nil {
		info.owner = old.owner
	}
	return context.WithValue(ctx, requestInfoKey{}, info)
}
