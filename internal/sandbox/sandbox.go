// Package sandbox defines where the model's code runs. A backend creates one
// sandbox per conversation; the agent loop writes files into /work, runs
// commands there and reads back what the code saved. Backends live in
// subpackages (local, docker, cpuos, kubernetes; pod is what terp sandbox
// serve runs inside a Kubernetes pod) and are held to the same rules: files live in WorkDir, output is bounded while it is read, a command
// that times out is killed together with every child, the host environment
// never enters the sandbox and the network is off unless configured.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"
)

// WorkDir is the directory inside every sandbox where uploads land and where
// the model is told to save its files.
const WorkDir = "/work"

// DataDir is WorkDir under the name OpenAI's code interpreter gives it, in
// every sandbox: gpt-oss and the models distilled from ChatGPT's analysis
// transcripts were trained on a notebook whose files are in /mnt/data, and
// their code reads and writes there. Backends make it the same directory as
// WorkDir (a second bind or mount of it, which the code cannot remove or
// replace), so a file written under either name is the one file, listed and
// downloaded once, by its WorkDir name.
const DataDir = "/mnt/data"

// WorkName turns a path under DataDir into the same path under WorkDir, so
// that a client or a model naming a file /mnt/data/x reaches /work/x. Any
// other path is returned as it is, for the backend's own checks.
func WorkName(p string) string {
	if rest, ok := strings.CutPrefix(path.Clean(p), DataDir); ok && (rest == "" || rest[0] == '/') {
		return WorkDir + rest
	}
	return p
}

// SessionID names a paused sandbox so that a later process can resume it.
type SessionID string

// Limits are the resource limits a sandbox enforces on the code it runs.
// Zero means the backend's default.
type Limits struct {
	MemoryBytes   int64 // address space or cgroup memory of one command
	Processes     int   // processes and threads alive at once
	FileSizeBytes int64 // largest file the code may write
	// WorkBytes is the most disk WorkDir may take, uploads included,
	// counted in blocks allocated (a sparse file counts what it holds). A
	// command that grows WorkDir past it is stopped, with ExecResult.Stopped
	// (or the Process's StopReason) saying so.
	WorkBytes int64
}

// Options configure a new sandbox.
type Options struct {
	// Timeout is the sandbox's whole lifetime (the seed's 30m); after it the
	// sandbox refuses new commands and may be removed.
	Timeout time.Duration
	Limits  Limits
	// Network says what outbound traffic the code may make. The zero value
	// is no network at all.
	Network Network
}

// NetworkMode is one of the egress modes users choose with --network.
type NetworkMode string

// The egress modes. NetworkNone is the default.
const (
	// NetworkNone gives the code no network beyond its own loopback.
	NetworkNone NetworkMode = "none"
	// NetworkAllowlist lets the code reach the names in Network.Allow over
	// HTTP(S), through a proxy that resolves names itself and refuses
	// private, loopback and link-local addresses.
	NetworkAllowlist NetworkMode = "allowlist"
	// NetworkFull gives the code the host's network.
	NetworkFull NetworkMode = "full"
)

// Network is a sandbox's egress policy.
type Network struct {
	// Mode is NetworkNone when empty.
	Mode NetworkMode `json:"mode,omitempty"`
	// Allow lists the host names NetworkAllowlist lets through; a leading
	// "*." matches any subdomain.
	Allow []string `json:"allow,omitempty"`
}

// Off reports whether the code gets no network at all.
func (n Network) Off() bool { return n.Mode == "" || n.Mode == NetworkNone }

// String is the policy as a user would write it: "allowlist (a, b)".
func (n Network) String() string {
	switch {
	case n.Mode == NetworkAllowlist:
		return fmt.Sprintf("%s (%s)", n.Mode, strings.Join(n.Allow, ", "))
	case n.Off():
		return string(NetworkNone)
	}
	return string(n.Mode)
}

// ExecOptions configure one command.
type ExecOptions struct {
	// Dir is the working directory inside the sandbox; WorkDir when empty.
	Dir string
	// Env is extra environment for the command, as KEY=VALUE pairs. The host
	// environment is never passed through.
	Env []string
	// Stdin, when set, is copied to the command's standard input.
	Stdin io.Reader
	// Timeout kills the command and all its children after this long.
	// Zero means no per-command timeout beyond the context's.
	Timeout time.Duration
	// MaxStdout and MaxStderr bound what is kept of each stream, in bytes;
	// see Capture. Zero means DefaultMaxOutput.
	MaxStdout int
	MaxStderr int
}

// DefaultMaxOutput is used when ExecOptions leaves a stream's bound unset.
const DefaultMaxOutput = 64 << 10

// ExecResult is what a finished command left behind. Stdout and Stderr are
// already cut to their bounds, keeping head and tail (see Capture).
type ExecResult struct {
	ExitCode int
	Stdout   string
	Stderr   string
	// StdoutBytes and StderrBytes count everything the command wrote,
	// including what was cut.
	StdoutBytes int64
	StderrBytes int64
	// TimedOut is set when the command was killed by ExecOptions.Timeout;
	// ExitCode is then ExitTimedOut.
	TimedOut bool
	// Stopped says why the sandbox stopped the command for breaking one of
	// its limits (WorkDir grew past Limits.WorkBytes), in words for the
	// model; empty otherwise. ExitCode is then 128+SIGKILL.
	Stopped  string
	Duration time.Duration
}

// StopReporter is a Process that can say why the sandbox stopped it, as
// ExecResult.Stopped does for Exec.
type StopReporter interface {
	StopReason() string
}

// ExitTimedOut is the ExitCode of a command killed by its timeout. It is the
// code coreutils' timeout(1) uses, so the model reads it the way it would in
// a shell. A command killed by a signal otherwise exits with 128+signal, as
// in a shell.
const ExitTimedOut = 124

// FileInfo describes one entry under WorkDir.
type FileInfo struct {
	// Path is relative to the listed directory, with forward slashes.
	Path    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

// Process is a long-lived command with its standard streams attached, used by
// the persistent Python kernel.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Signal delivers sig to the process and all its children.
	Signal(sig Signal) error
	// Wait blocks until the process exits and returns its exit code.
	Wait() (int, error)
}

// Signal is a portable signal name, so that remote backends need not speak
// syscall numbers.
type Signal string

// Signals a Process can be sent.
const (
	SIGINT  Signal = "INT"
	SIGTERM Signal = "TERM"
	SIGKILL Signal = "KILL"
)

// Number is the signal's number on this machine, for a backend that sends
// it to processes of its own.
func (s Signal) Number() (syscall.Signal, error) {
	switch s {
	case SIGINT:
		return syscall.SIGINT, nil
	case SIGTERM:
		return syscall.SIGTERM, nil
	case SIGKILL:
		return syscall.SIGKILL, nil
	}
	return 0, fmt.Errorf("signal %q is not supported", string(s))
}

// Sandbox is one isolated place for one conversation's code.
type Sandbox interface {
	// ID names the sandbox for Backend.Resume. It is known from the start,
	// so a conversation can record it before its first step: a terp killed
	// before it could pause still leaves a sandbox the next one can find.
	ID() SessionID
	// WriteFile creates or replaces path (inside WorkDir) with r's bytes.
	WriteFile(ctx context.Context, path string, r io.Reader) error
	// ReadFile opens path for reading. The caller closes it.
	ReadFile(ctx context.Context, path string) (io.ReadCloser, error)
	// List walks dir recursively and returns its regular files. Past
	// MaxListEntries it returns the most recently modified ones with a
	// *TruncatedError, beside which the files returned are still good.
	List(ctx context.Context, dir string) ([]FileInfo, error)
	// Exec runs cmd to completion. A non-zero exit or a timeout is reported
	// in ExecResult, not as an error; the error is for the sandbox failing.
	Exec(ctx context.Context, cmd []string, opt ExecOptions) (ExecResult, error)
	// Start runs cmd in the background with pipes to its standard streams.
	Start(ctx context.Context, cmd []string, opt ExecOptions) (Process, error)
	// Pause stops the sandbox's processes and returns an id to resume it.
	Pause(ctx context.Context) (SessionID, error)
	// Close stops everything and removes the sandbox.
	Close(ctx context.Context) error
}

// Backend creates and resumes sandboxes of one kind.
type Backend interface {
	Create(ctx context.Context, opt Options) (Sandbox, error)
	Resume(ctx context.Context, id SessionID) (Sandbox, error)
}

// Pruner is a Backend that can remove sandboxes left running past their
// lifetime by a terp that died before it could pause or close them.
type Pruner interface {
	Prune(ctx context.Context) ([]SessionID, error)
}

// ErrExpired is returned by a sandbox whose lifetime (Options.Timeout) is over,
// and by Resume for a session that no longer exists.
var ErrExpired = errors.New("sandbox expired")
