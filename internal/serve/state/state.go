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
	// Replica is the address of the terp serve replica it is open in,
	// which the others forward its requests to; "" while it is paused.
	Replica string `json:"replica,omitempty"`
	// KeepConversation keeps the conversation stored when the container
	// is removed (see serve.ContainerSpec).
	KeepConversation bool `json:"keep_conversation,omitempty"`
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
