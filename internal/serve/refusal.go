package serve

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/terpdev/terp/internal/config"
)

// Refusal is a request the host turns away for a limit, said in no
// protocol's words: each protocol that terp serve speaks renders it its own
// way, so that a client of any of them hears of the same limits.
type Refusal struct {
	// Status is the HTTP status the refusal calls for: 429 for a limit
	// that frees with time, 413 for a body over its size, 408 for a body
	// that came too slowly.
	Status int
	// Kind is what ran out: one of the Refused constants.
	Kind string
	// Message says which limit, and what the client may do.
	Message string
	// RetryAfter is how long until the request may pass; 0: unknown.
	RetryAfter time.Duration
	// Final tells the client not to retry on its own: waiting RetryAfter
	// out would block it for hours.
	Final bool
}

// The kinds of a Refusal. Those of a 429 are the names OpenAI gives its
// own rate limits, which its error's type carries.
const (
	RefusedRequests   = "requests"   // the key's requests per minute
	RefusedTokens     = "tokens"     // the key's tokens per day
	RefusedContainers = "containers" // the key's containers, or the server's
	RefusedRuns       = "runs"       // the turns the server runs at once
	RefusedSize       = "size"       // a body over the server's cap
	RefusedTimeout    = "timeout"    // a body slower than the server's read deadline
)

func (r *Refusal) Error() string { return r.Message }

// AsRefusal is the refusal err is about, or nil: a limit's, a body over
// its cap or too slow among them (see boundedBody).
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// rateLimited is the 429 of a limit of kind that frees in retry.
func rateLimited(kind string, retry time.Duration, format string, a ...any) *Refusal {
	return &Refusal{Status: http.StatusTooManyRequests, Kind: kind, Message: fmt.Sprintf(format, a...), RetryAfter: retry}
}

// tooLarge is the 413 of a body over limit bytes, which names the flag
// that sets it.
func TooLarge(what string, limit int64, flag string) *Refusal {
	return &Refusal{Status: http.StatusRequestEntityTooLarge, Kind: RefusedSize,
		Message: fmt.Sprintf("%s is over %s, the most this server takes (terp serve %s); send less", what, config.SizeText(limit), flag)}
}
