// Package state keeps what terp serve must not lose when it stops: the
// files clients uploaded, the containers (which conversation each is, which
// ids its files have), the stored responses and each key's token usage. A
// restarted server finds them all; several replicas that share one State
// (PostgreSQL) serve the same clients.
//
// The conversations themselves (history, uploads kept for a new sandbox)
// live in the conversation store (internal/store); a container names its
// conversation by id.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// State is where a server keeps its objects. Every method is safe for
// concurrent use, from several processes when the implementation is
// shared. Objects belong to an owner (a key's name): a lookup with another
// owner is ErrNotFound, as if the object did not exist.
type State interface {
	// PutFile stores content as the file f (its ID, Owner, Filename,
	// Purpose and CreatedAt set by the caller) and returns f with its size.
	// Content over max bytes is refused with ErrTooLarge and leaves nothing.
	PutFile(ctx context.Context, f File, content io.Reader, max int64) (File, error)
	File(ctx context.Context, owner, id string) (File, error)
	OpenFile(ctx context.Context, f File) (io.ReadCloser, error)
	// Files lists owner's files, the newest first.
	Files(ctx context.Context, owner string) ([]File, error)
	DeleteFile(ctx context.Context, owner, id string) error

	// SaveContainer writes c whole, creating or replacing it.
	SaveContainer(ctx context.Context, c Container) error
	Container(ctx context.Context, owner, id string) (Container, error)
	// Containers lists owner's containers, or everyone's for "", the
	// newest first.
	Containers(ctx context.Context, owner string) ([]Container, error)
	DeleteContainer(ctx context.Context, owner, id string) error

	// SaveResponse stores r and forgets the owner's oldest responses past
	// keep.
	SaveResponse(ctx context.Context, r Response, keep int) error
	Response(ctx context.Context, owner, id string) (Response, error)
	DeleteResponse(ctx context.Context, owner, id string) error

	// AddUsage adds tokens to owner's count for day (UTC, 2006-01-02) and
	// returns the new count; Usage reads it.
	AddUsage(ctx context.Context, owner, day string, tokens int64) (int64, error)
	Usage(ctx context.Context, owner, day string) (int64, error)

	// TakeRequest spends one of owner's requests at now under a limit of
	// rpm a minute: a bucket that holds rpm and refills at rpm a minute,
	// so a key may send rpm requests at once, then one each 60/rpm
	// seconds. An empty bucket spends nothing: ok is false and wait says
	// how long until a request is back. A shared state counts the requests
	// every replica took; the directory counts in memory, for its process.
	TakeRequest(ctx context.Context, owner string, rpm int, now time.Time) (wait time.Duration, ok bool, err error)

	// HoldPlace holds a place for the container id of owner's while it is
	// made, if it leaves the live containers within most, counting the
	// saved ones and the places held, each id once; a place over most is a
	// *FullError. Two servers holding the last place at once cannot both
	// get it. A place counts until ReleasePlace, which the server calls
	// once the container is saved (or was not made), or for PlaceLifetime
	// after now: a replica that died making a container leaves its place
	// for that long.
	HoldPlace(ctx context.Context, owner, id string, most Most, now time.Time) error
	ReleasePlace(ctx context.Context, id string) error

	// Secret is a random key that every server sharing the state reads
	// the same, made on first use: a replica signs with it what the others
	// must believe of it and a client must not be able to say (that it
	// counted a request it forwards).
	Secret(ctx context.Context) ([]byte, error)

	// AddGone remembers the answers a container of owner's gave (digests,
	// as Container.Replies), once it is removed, until forget: a chat
	// client that goes on from one is told its container is gone. It
	// forgets owner's answers remembered before forget.
	AddGone(ctx context.Context, owner string, digests []string, at, forget time.Time) error
	// Gone reports whether digest is an answer AddGone remembers for
	// owner.
	Gone(ctx context.Context, owner, digest string) (bool, error)

	// Check fails when the state cannot be written: /readyz asks it.
	Check(ctx context.Context) error
	// Where names the state in messages.
	Where() string
	Close() error
}

// ErrNotFound is returned for an object that does not exist, or is
// another owner's.
var ErrNotFound = errors.New("not found")

// ErrTooLarge is returned by PutFile for content over its bound.
var ErrTooLarge = errors.New("the file is too large")

// Most bounds the live containers (open or paused, until deleted or
// expired) that HoldPlace leaves: Owner's, and All of everyone's together;
// 0 is no bound.
type Most struct {
	Owner, All int
}

// PlaceLifetime is how long a place HoldPlace held counts unless it is
// released: longer than making a container takes (a sandbox on a remote
// backend, its files copied in).
const PlaceLifetime = 10 * time.Minute

// FullError is HoldPlace's refusal: Held containers, besides the one
// asked for, are live or being made, which is as many as the bound allows.
// All says the bound is everyone's together (Most.All), not the owner's.
type FullError struct {
	All  bool
	Held int
}

func (e *FullError) Error() string {
	if e.All {
		return fmt.Sprintf("%d containers are live, the most the server may hold", e.Held)
	}
	return fmt.Sprintf("%d of the key's containers are live, the most it may have", e.Held)
}

// File is an uploaded file.
type File struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Filename  string    `json:"filename"`
	Purpose   string    `json:"purpose"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
}

// Container is a container's record: everything but its live sandbox.
type Container struct {
	ID         string    `json:"id"`
	Owner      string    `json:"owner"`
	Name       string    `json:"name"`
	CreatedAt  time.Time `json:"created_at"`
	LastActive time.Time `json:"last_active"`
	// Minutes is how long it lives after LastActive.
	Minutes int     `json:"minutes"`
	Memory  string  `json:"memory"`
	Network Network `json:"network"`
	// Conversation is the id of its conversation in the conversation store.
	Conversation string `json:"conversation"`
	// Last is the id of the response that ran last in it.
	Last string `json:"last,omitempty"`
	// Replies are digests of the chat completions answered in it, newest
	// last, for a chat client that sends back only the history: its last
	// assistant message names the container (see docs/serve.md).
	Replies []string `json:"replies,omitempty"`
	// Files gives the files of /work their ids (path relative to /work ->
	// id), for the container's life; User lists those a client uploaded.
	Files map[string]string `json:"files,omitempty"`
	User  []string          `json:"user,omitempty"`
	// Origin is the protocol that made it ("" for OpenAI's API, "jupyter",
	// "mcp"), whose conversation is stored as from it, and whose listing
	// shows it.
	Origin string `json:"origin,omitempty"`
	// ValueApart keeps a cell's trailing value out of its output, for a
	// protocol that shows it apart (Jupyter's execute_result).
	ValueApart bool `json:"value_apart,omitempty"`
	// Fresh runs every exec as a new Python program (see
	// serve.ContainerSpec).
	Fresh bool `json:"fresh,omitempty"`
	// Replica is the address of the terp serve replica it is open in,
	// which the others forward its requests to; "" while it is paused.
	Replica string `json:"replica,omitempty"`
	// KeepConversation keeps the conversation stored when the container
	// is removed (see serve.ContainerSpec).
	KeepConversation bool `json:"keep_conversation,omitempty"`
	// Ref is what a protocol's client names it by where that is not its
	// id (see serve.ContainerSpec), for a restarted server to find it.
	Ref string `json:"ref,omitempty"`
}

// Expired reports whether c is past its expiry at now.
func (c Container) Expired(now time.Time) bool {
	return now.Sub(c.LastActive) > time.Duration(c.Minutes)*time.Minute
}

// Network is a container's egress policy, as the API writes it.
type Network struct {
	Type           string   `json:"type"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
}

// Response is a stored response: the object the client was sent, and the
// history (the conversation's messages) at its end, which
// previous_response_id rewinds to.
type Response struct {
	ID        string          `json:"id"`
	Owner     string          `json:"owner"`
	Container string          `json:"container"`
	CreatedAt time.Time       `json:"created_at"`
	Object    json.RawMessage `json:"object"`
	History   json.RawMessage `json:"history"`
}
