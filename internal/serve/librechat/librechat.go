// Package librechat is LibreChat's Code Interpreter API on terp serve's
// host, under /librechat/v1: LibreChat's agents (through @librechat/agents'
// execute_code tool) run code, upload files and download what the code
// wrote, in terp's sandboxes instead of a hosted service.
//
// A session is a container of the host (its id 21 characters of
// [A-Za-z0-9_-], as LibreChat's routes accept) that runs every exec as a
// new program (serve.ContainerSpec.Fresh): nothing but /mnt/data carries
// over, as LibreChat's tool tells the model. The files a run wrote, and the
// files clients upload, are kept in the host's state apart from the
// sandbox, each with an id of its own, for keepFiles after they were
// written: LibreChat names them in later execs (file references), and a
// session that expired meanwhile, or another of the same key's, gets them
// copied into its /mnt/data. A key sees only its own sessions and files.
// Code runs through the host's exec path, so the key's limits, the run
// cap, the per-run timeout, metrics and logs hold as for every protocol.
// See docs/librechat.md.
package librechat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/serve"
)

// Prefix is where the API is served: LIBRECHAT_CODE_BASEURL is the
// server's address with it.
const Prefix = "/librechat/v1"

// origin names the sessions' containers, for the host's records.
const origin = "librechat"

// keepFiles is how long a file a run wrote, or a client uploaded, is kept
// after it was written. LibreChat uploads an attachment again once it is
// 23 hours old, and offers a file the code wrote for download for 24
// hours: two days is more than either needs.
const keepFiles = 48 * time.Hour

// Options are what the API is registered with.
type Options struct {
	// JWT, when set, accepts LibreChat's signed tokens (Authorization:
	// Bearer) beside keys sent as X-API-Key; nil accepts keys only.
	JWT *JWT
}

// api is LibreChat's code API on one host.
type api struct {
	host *serve.Server
	jwt  *JWT

	mu sync.Mutex
	// sessions hold a lock per session in use in this process: execs of
	// one session run one at a time, in the order they came, rather than
	// refused as busy (a model may call the tool twice at once).
	sessions map[string]*sessionLock
	// pruned is when each key's old files were last looked for.
	pruned map[string]time.Time
}

// Register serves LibreChat's code API on host.
func Register(host *serve.Server, opt Options) { host.Register(newAPI(host, opt).protocol()) }

func newAPI(host *serve.Server, opt Options) *api {
	return &api{host: host, jwt: opt.JWT, sessions: map[string]*sessionLock{}, pruned: map[string]time.Time{}}
}

func (a *api) protocol() serve.Protocol {
	keyIn := "X-API-Key: KEY (LIBRECHAT_CODE_API_KEY)"
	if a.jwt != nil {
		keyIn += ", or LibreChat's signed token as Authorization: Bearer"
	}
	return serve.Protocol{Name: "librechat", Credential: apiKey, KeyIn: keyIn, Refuse: refuse, Routes: []serve.Route{
		{Pattern: "POST " + Prefix + "/exec", Handler: a.exec},
		{Pattern: "POST " + Prefix + "/upload", Handler: a.upload, Upload: true},
		{Pattern: "GET " + Prefix + "/download/{session}/{file}", Handler: a.download},
		{Pattern: "GET " + Prefix + "/files/{session}", Handler: a.files},
	}, Identify: a.identify}
}

// apiKey is a request's key, where LibreChat sends it: X-API-Key; a bearer
// key that is no signed token is taken too.
func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if k := serve.Bearer(r); k != "" && !looksSigned(k) {
		return k
	}
	return ""
}

// identify is the principal a request's signed token names; "" when it
// sends none (its X-API-Key is looked up instead). A token sent to a
// server that takes none is refused saying so, but by a server without
// keys (--no-auth), which takes anything.
func (a *api) identify(r *http.Request) (string, error) {
	token := serve.Bearer(r)
	switch {
	case r.Header.Get("X-API-Key") != "" || !looksSigned(token):
		return "", nil
	case a.jwt == nil:
		if _, open := a.host.Lookup(""); open {
			return "", nil
		}
		return "", &TokenError{"this server takes no signed tokens: start terp serve with --librechat-jwt-key, LibreChat's public key, or send a key as X-API-Key"}
	}
	return a.jwt.Principal(token, time.Now())
}

// errorBody is how the API says no. The older client reads only the
// status; the newer reads error "rate_limited" with retry_after_seconds,
// which it tells the model to wait out. A person reading curl's output
// reads the message.
type errorBody struct {
	Error             string `json:"error"`
	Message           string `json:"message,omitempty"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

// refuse answers err with its status: the client's mistakes are 400s, a
// refused token 401, the rest as the host says.
func refuse(w http.ResponseWriter, err error) {
	body := errorBody{Error: err.Error()}
	status := statusOf(err)
	if r := serve.AsRefusal(err); r != nil && r.RetryAfter > 0 {
		seconds := int(r.RetryAfter.Seconds() + 0.999)
		w.Header().Set("Retry-After", fmt.Sprint(seconds))
		if status == http.StatusTooManyRequests {
			body = errorBody{Error: "rate_limited", Message: err.Error(), RetryAfterSeconds: seconds}
		}
	}
	serve.WriteJSON(w, status, body)
}

func statusOf(err error) int {
	var bad *badRequest
	var input *conversation.InputError
	var token *TokenError
	switch {
	case errors.As(err, &bad), errors.As(err, &input):
		return http.StatusBadRequest
	case errors.As(err, &token):
		return http.StatusUnauthorized
	}
	return serve.StatusOf(err)
}

// badRequest is a request the API refuses with 400.
type badRequest struct{ message string }

func (e *badRequest) Error() string { return e.message }

func badRequestf(format string, a ...any) *badRequest {
	return &badRequest{fmt.Sprintf(format, a...)}
}

// idAlphabet is the characters of an id: LibreChat's routes take only
// these.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// idLen is the length of an id, as LibreChat's routes check it.
const idLen = 21

var validID = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]{21}$`)
})

// newID is a new session's or file's id: 21 random characters of 64, 126
// bits that no client can guess.
func newID() string {
	b := make([]byte, idLen)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	for i := range b {
		b[i] = idAlphabet[b[i]&63]
	}
	return string(b)
}

// sessionLock orders the execs of one session in this process.
type sessionLock struct {
	mu    sync.Mutex
	users int
}

// lock waits for the session id to be free, or ctx to end, and returns
// its unlock, which may be called more than once.
func (a *api) lock(ctx context.Context, id string) (func(), error) {
	a.mu.Lock()
	l := a.sessions[id]
	if l == nil {
		l = &sessionLock{}
		a.sessions[id] = l
	}
	l.users++
	a.mu.Unlock()
	release := func() {
		a.mu.Lock()
		if l.users--; l.users == 0 {
			delete(a.sessions, id)
		}
		a.mu.Unlock()
	}
	got := make(chan struct{})
	go func() {
		l.mu.Lock()
		close(got)
	}()
	select {
	case <-got:
		var once sync.Once
		return func() { once.Do(func() { l.mu.Unlock(); release() }) }, nil
	case <-ctx.Done():
		go func() { <-got; l.mu.Unlock(); release() }()
		return nil, ctx.Err()
	}
}

// purpose is the stored purpose of the files of session id, which ties
// each file to its session.
func purpose(session string) string { return origin + ":" + session }

// sessionOf is the session of a stored file's purpose; "" for a file that
// is none of this API's.
func sessionOf(purpose string) string {
	s, ok := strings.CutPrefix(purpose, origin+":")
	if !ok {
		return ""
	}
	return s
}
