package tui

import (
	"context"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/conversation"
	"github.com/terpdev/terp/internal/sandbox"
)

// Conversation is what the chat needs from one conversation with the model:
// a *conversation.Conversation, or a script in tests. Its methods do I/O, so
// the chat calls them only from commands, never from Update, and never two
// at a time; Info alone never waits.
type Conversation interface {
	// Info describes the conversation for the status line.
	Info() conversation.Info
	// Ask runs one turn of the loop, sending its events to send, then
	// downloads the files the code saved, even when the turn failed or
	// was cancelled: they are the user's results.
	Ask(ctx context.Context, question string, send func(agent.Event)) (conversation.Turn, error)
	// Upload copies a file of this machine to /work and returns where it
	// landed in the sandbox.
	Upload(ctx context.Context, path string) (string, error)
	// Download copies the file name (relative to /work) to the output
	// directory and returns it.
	Download(ctx context.Context, name string) (conversation.File, error)
	// Files lists /work. A listing cut short (sandbox.ErrListTruncated)
	// comes with its error and still holds the newest files.
	Files(ctx context.Context) ([]sandbox.FileInfo, error)
	// SetModel and SetMaxSteps change the following turns. They wait for
	// a running turn, which the chat never has when it calls them, so
	// they return at once; the error is ctx's.
	SetModel(ctx context.Context, name string) error
	SetMaxSteps(ctx context.Context, n int) error
}

var _ Conversation = (*conversation.Conversation)(nil)

// The chat shows the conversation service's values as they are.
type (
	Info     = conversation.Info
	Exchange = conversation.Exchange
	Turn     = conversation.Turn
	File     = conversation.File
)
