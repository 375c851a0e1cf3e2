package tui

import (
	"context"

	"github.com/terpdev/terp/internal/agent"
	"github.com/terpdev/terp/internal/sandbox"
)

// Conversation is what the chat needs from one conversation with the model.
// The CLI implements it on top of its session (sandbox, runner, agent);
// tests implement it with a script. Its methods do I/O, so the chat calls
// them only from commands, never from Update, and never two at a time.
type Conversation interface {
	// Info describes the conversation for the status line.
	Info() Info
	// Ask runs one turn of the loop, sending its events to send, then
	// downloads the files the code saved, even when the turn failed or
	// was cancelled: they are the user's results.
	Ask(ctx context.Context, question string, send func(agent.Event)) (Turn, error)
	// Upload copies a file of this machine to /work and returns where it
	// landed in the sandbox.
	Upload(ctx context.Context, path string) (string, error)
	// Download copies the file name (relative to /work) to the output
	// directory and returns it.
	Download(ctx context.Context, name string) (File, error)
	// Files lists /work. A listing cut short (sandbox.ErrListTruncated)
	// comes with its error and still holds the newest files.
	Files(ctx context.Context) ([]sandbox.FileInfo, error)
	// SetModel and SetMaxSteps change the following turns.
	SetModel(name string)
	SetMaxSteps(n int)
}

// Info is what the status line tells about a conversation.
type Info struct {
	ID       string
	Model    string
	Sandbox  string
	MaxSteps int
	// Earlier counts the questions asked before this chat, in a stored
	// conversation the chat goes on with.
	Earlier int
	// Past are the last of those questions with their answers, shown
	// before the chat goes on.
	Past []Exchange
}

// Exchange is one earlier question and its answer ("" when it got none).
type Exchange struct {
	Question, Answer string
}

// Turn is the outcome of one question.
type Turn struct {
	Result agent.Result
	// Files are the files the code saved, downloaded.
	Files []File
	// Warnings are problems that did not end the turn, such as a file
	// too large to download.
	Warnings []string
}

// File is a file downloaded from the sandbox.
type File struct {
	// Name is the path relative to /work.
	Name string
	// Path is where it was written on this machine, as the user would
	// type it (relative to the current directory by default).
	Path  string
	Bytes int64
}
