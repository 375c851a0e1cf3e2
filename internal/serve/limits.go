package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/llm"
	"github.com/terpdev/terp/internal/serve/state"
)

// Limits bound what one key may use, so that one client cannot take the
// machine or the model server from the others. Zero means no limit.
type Limits struct {
	// Containers bounds the key's containers, open or paused, until they
	// are deleted or expire: each holds a sandbox, or may again. The state
	// counts them, those being made too (State.HoldPlace), so the bound
	// holds across replicas.
	Containers int
	// RPM bounds the key's requests per minute, to any endpoint. It is a
	// token bucket: a key may send RPM requests at once, then one each
	// 60/RPM seconds. The state counts it (State.TakeRequest), so replicas
	// on one PostgreSQL share each key's bucket; a request one replica
	// forwards to another counts once, where it came in.
	RPM int
	// TokensPerDay bounds the prompt and completion tokens the key's
	// code-interpreter turns (and the chat completions passed through that
	// report their usage) use in a UTC day, as counted in the state, which
	// every replica shares. A turn that starts under it runs to its end;
	// the next is refused until midnight UTC.
	TokensPerDay int64
}

// Principal is who a request is, once its key was looked up (Keyring): the
// name the key was given, which owns what its requests make (containers,
// files, responses) and labels the logs and metrics, and the limits it is
// held to.
type Principal struct {
	Name   string
	Limits Limits
}

// Caps bound the whole server, whatever the key.
type Caps struct {
	// Containers bounds the containers of all keys together, open or
	// paused; 0: no bound. Counted in the state, as a key's are, it bounds
	// what all the replicas sharing it hold together.
	Containers int
	// Runs bounds the turns running at once in this process (responses,
	// and chat completions that run the code interpreter); 0: no bound. A
	// turn over it is refused at once, not queued: a queue would hold the
	// client's connection for as long as the others run, and the SDKs
	// retry a 429 after its Retry-After by themselves.
	//
	// It stays a bound of each replica, not of them all: it is the
	// capacity of a machine (each turn holds a goroutine, a kernel's
	// pipes and, with local sandboxes, the machine's CPU), which is what
	// more replicas are added for. A key's share of all the replicas is
	// bounded by its own limits. A shared count would also need a lease
	// that a replica killed mid-turn leaves behind, refusing turns that
	// nothing runs until it expires.
	Runs int
	// Upload bounds one uploaded file; 0: DefaultMaxUpload.
	Upload int64
	// Request bounds a JSON request body; 0: DefaultMaxRequest.
	Request int64
}

// The size caps a server has unless Caps says otherwise.
const (
	DefaultMaxUpload  = 512 << 20
	DefaultMaxRequest = 8 << 20
)

// uploadSlack is what a multipart upload may hold besides its file: the
// part headers and the other fields.
const uploadSlack = 1 << 20

// busyRetry is the Retry-After of a refusal for a cap that frees when
// other work ends (runs, containers), which terp cannot foresee.
const busyRetry = 5 * time.Second

// utcDay is the day t falls on in UTC, as the state's usage names days.
func utcDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// untilMidnight is how long from t until the next UTC day begins.
func untilMidnight(t time.Time) time.Duration {
	t = t.UTC()
	y, m, d := t.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Sub(t)
}

// limiter holds what the limits need besides the state, which counts
// each key's requests and containers: the turns running in this process,
// which Caps.Runs bounds per replica.
type limiter struct {
	caps Caps
	// keys hold each principal's limits.
	keys *Keyring

	mu   sync.Mutex
	runs int
}

func newLimiter(caps Caps, keys *Keyring) *limiter {
	l := &limiter{caps: caps, keys: keys}
	if l.caps.Upload <= 0 {
		l.caps.Upload = DefaultMaxUpload
	}
	if l.caps.Request <= 0 {
		l.caps.Request = DefaultMaxRequest
	}
	return l
}

// limits are the limits of owner.
func (l *limiter) limits(owner string) Limits { return l.keys.limits(owner) }

// takeRequest spends one of owner's requests of the minute, or refuses
// it with a *Refusal: the key is over its Limits.RPM. Any other error is
// the state's, which could not count it.
func (s *Server) takeRequest(ctx context.Context, owner string) error {
	rpm := s.lim.limits(owner).RPM
	if rpm <= 0 {
		return nil
	}
	wait, ok, err := s.state.TakeRequest(ctx, owner, rpm, time.Now())
	if err != nil {
		return fmt.Errorf("cannot count the requests of key %s: %w", owner, err)
	}
	if ok {
		return nil
	}
	return rateLimited(RefusedRequests, wait, "Rate limit reached for key %s on requests per min (RPM): limit %d. Please try again in %s.",
		owner, rpm, wait.Round(time.Millisecond))
}

// admit lets a request of owner's through to its handler, or answers it:
// a key over its requests per minute, a body declared over its bound. A
// request another replica forwarded, and counted (see counted), is not
// counted again. What it lets through is a copy of r with its body
// bounded: an upload's by Caps.Upload, any other's by Caps.Request.
// (net/http's own request keeps its own body, which it looks at after the
// answer.)
func (s *Server) admit(w http.ResponseWriter, r *http.Request, owner string, rt *route) (*http.Request, bool) {
	l := s.lim
	if !s.counted(r, owner) {
		if err := s.takeRequest(r.Context(), owner); err != nil {
			rt.proto.Refuse(w, err)
			return nil, false
		}
	}
	limit, refusal := l.caps.Request, TooLarge("the request body", l.caps.Request, "--max-request-size")
	if rt.upload(r) {
		limit, refusal = l.caps.Upload+uploadSlack, TooLarge("the upload", l.caps.Upload, "--max-upload")
	}
	if r.ContentLength > limit {
		rt.proto.Refuse(w, refusal)
		return nil, false
	}
	r = r.WithContext(r.Context())
	r.Body = &boundedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), err: refusal}
	return r, true
}

// uploadPart bounds an uploaded file to Caps.Upload, exactly, whatever the
// request declared.
func (s *Server) UploadPart(r io.Reader) io.Reader {
	return &cappedReader{r: r, left: s.lim.caps.Upload, err: TooLarge("the file", s.lim.caps.Upload, "--max-upload")}
}

// cappedReader fails with err past its bound, rather than ending early: a
// file cut short must not be kept as if it were whole.
type cappedReader struct {
	r    io.Reader
	left int64
	err  error
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, c.err
	}
	return n, err
}

// boundedBody is a request body behind http.MaxBytesReader, whose error
// it turns into the 413 that names the cap and its flag; a body that came
// too slowly for the server's read deadline (net/http reports a bare
// deadline error) into a 408. Only here is a deadline the client's: one
// from the sandbox or the state is terp's.
type boundedBody struct {
	io.ReadCloser
	err error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = b.err
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = &Refusal{Status: http.StatusRequestTimeout, Kind: RefusedTimeout,
			Message: "the request body came too slowly and the server stopped waiting for it (terp serve --body-timeout); send it again"}
	}
	return n, err
}

// reserveContainer holds a place for the new container id of owner's, or
// says which limit has none left; done gives the place back once the
// container is saved in the state, or was not made. Containers count
// whether open or paused, until they are deleted or expire; those being
// made count too. The state holds the place (State.HoldPlace), so that two
// made at once, in one replica or two, cannot both take the last place.
func (s *Server) reserveContainer(ctx context.Context, owner, id string) (done func(commit func()), err error) {
	most := state.Most{Owner: s.lim.limits(owner).Containers, All: s.lim.caps.Containers}
	if most.Owner <= 0 && most.All <= 0 {
		return func(commit func()) {
			if commit != nil {
				commit()
			}
		}, nil
	}
	err = s.state.HoldPlace(ctx, owner, id, most, time.Now())
	var full *state.FullError
	switch {
	case errors.As(err, &full) && full.All:
		return nil, rateLimited(RefusedContainers, busyRetry,
			"terp serve holds %d live containers, the most it may (terp serve --max-containers); try again when some have expired or been deleted", full.Held)
	case errors.As(err, &full):
		return nil, rateLimited(RefusedContainers, busyRetry,
			"this key has %d live containers, the most it may have; delete some (DELETE /v1/containers/ID) or let them expire", full.Held)
	case err != nil:
		return nil, fmt.Errorf("cannot count the containers of key %s: %w", owner, err)
	}
	var once sync.Once
	return func(commit func()) {
		once.Do(func() {
			// The record is saved before the place is given back, so
			// that a count in between sees one of them.
			if commit != nil {
				commit()
			}
			if err := s.state.ReleasePlace(context.WithoutCancel(ctx), id); err != nil {
				s.cfg.Log.Warn("releasing a container's place", "container", id, "error", err)
			}
		})
	}, nil
}

// run is one turn that holds a place under Caps.Runs.
type run struct {
	s     *Server
	owner string
	once  sync.Once
}

// beginRun admits a turn of owner's, or refuses it with a *Refusal: the
// key has used its tokens for the day, or the server runs all the turns it
// may. Any other error is the state's, which could not say what the key
// used. Call done when the turn has ended, and count with its usage.
func (s *Server) beginRun(ctx context.Context, owner string) (*run, error) {
	if err := s.CheckTokens(ctx, owner); err != nil {
		return nil, err
	}
	if refusal := s.lim.takeRun(); refusal != nil {
		return nil, refusal
	}
	return &run{s: s, owner: owner}, nil
}

// takeRun holds a place under Caps.Runs, or refuses the turn at once.
func (l *limiter) takeRun() *Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	if most := l.caps.Runs; most > 0 && l.runs >= most {
		return rateLimited(RefusedRuns, busyRetry, "terp serve is running %d turns, the most it may at once (terp serve --max-runs); try again shortly", most)
	}
	l.runs++
	return nil
}

// done gives the turn's place back; it may be called more than once.
func (u *run) done() {
	u.once.Do(func() {
		l := u.s.lim
		l.mu.Lock()
		l.runs--
		l.mu.Unlock()
	})
}

// count adds the tokens a turn used to its key's day, even when its client
// has gone: the model server did the work.
func (u *run) count(ctx context.Context, used llm.Usage) {
	u.s.CountTokens(ctx, u.owner, int64(used.PromptTokens+used.CompletionTokens))
}

func (s *Server) CountTokens(ctx context.Context, owner string, tokens int64) {
	if tokens <= 0 {
		return
	}
	if _, err := s.state.AddUsage(context.WithoutCancel(ctx), owner, utcDay(time.Now()), tokens); err != nil {
		s.cfg.Log.Warn("counting tokens", "owner", owner, "tokens", tokens, "error", err)
	}
}

// checkTokens refuses a turn of owner's with a *Refusal when the key has
// used its tokens for the day; any other error is the state's.
func (s *Server) CheckTokens(ctx context.Context, owner string) error {
	most := s.lim.limits(owner).TokensPerDay
	if most <= 0 {
		return nil
	}
	now := time.Now()
	used, err := s.state.Usage(ctx, owner, utcDay(now))
	if err != nil {
		return fmt.Errorf("cannot read the tokens key %s used today: %w", owner, err)
	}
	if used < most {
		return nil
	}
	refusal := rateLimited(RefusedTokens, untilMidnight(now),
		"Rate limit reached for key %s on tokens per day (TPD): limit %d, used %d. The limit resets at midnight UTC, in %s.",
		owner, most, used, untilMidnight(now).Round(time.Minute))
	refusal.Final = true
	return refusal
}
