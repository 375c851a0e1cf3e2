package llmtest

import "testing"

// Each starts a server that answers every chat request with step, however
// many arrive and in whatever order: for load, where the requests of many
// conversations interleave and New's numbered script cannot say which is
// which, step finds its conversation and its place in the request itself.
// It keeps no requests (Requests returns none), so a long run does not grow
// the test's own memory. The server is closed when the test ends.
func Each(t testing.TB, step Step) *Server {
	return start(&Server{t: t, each: step})
}
